"""Upkeep passes the serving app runs on its own: one every so often, on a thread."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from anyio import to_thread

log = logging.getLogger(__name__)


async def every(interval_seconds: float, upkeep: Callable[[], None], what: str) -> None:
    """``upkeep`` every ``interval_seconds``, whatever the last pass did: a pass that
    fails is logged, never the loop's end."""
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            await to_thread.run_sync(upkeep)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("%s failed: %s", what, error, exc_info=error)
