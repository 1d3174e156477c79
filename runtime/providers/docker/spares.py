"""Blank disks made ahead: a new sandbox's workspace and writable-layer disks are a
rename away instead of a ``mkfs`` on the request's path.

One thread per service instance keeps ``SIESTA_SANDBOX__SPARE_DISKS`` blank images of
each size the deployment makes (the workspace's and the writable layer's), topping
them up as sandboxes take them. Spares are removed when the service stops; a
sandbox made while none waits formats its own, as before.
"""

from __future__ import annotations

import logging
import threading

from runtime.core.errors import SiestaError
from runtime.providers.docker.disks import LoopDisks

log = logging.getLogger(__name__)

RESTOCK_SECONDS = 0.5
"""How often the stock is looked at (taking a spare is a rename: it leaves no trace
to wake on)."""


class SpareDisks:
    def __init__(self, disks: LoopDisks, sizes: list[int], count: int) -> None:
        self._disks = disks
        self._sizes = sorted({size for size in sizes if size > 0})
        self._count = count
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spare-disks", daemon=True)

    def start(self) -> None:
        if self._sizes and self._count > 0:
            self._thread.start()

    def stop(self) -> None:
        """Stop, and remove the spares if this instance was making them (a command
        line run that never started leaves the serving instances' stock alone)."""
        self._stopping.set()
        if self._thread.ident is None:
            return
        self._thread.join(timeout=10)
        self._disks.remove_spares()

    def _run(self) -> None:
        while not self._stopping.is_set():
            for size in self._sizes:
                if self._stopping.is_set():
                    return
                try:
                    self._disks.stock_spares(size, self._count)
                except (OSError, SiestaError) as error:
                    log.warning("could not make spare %d MB disks: %s", size, error)
            self._stopping.wait(RESTOCK_SECONDS)
