"""Provider calls with a time limit, each on a thread of its own.

Creating, recreating and resuming a sandbox may take longer than its limit (an
engine that is slow to pull, a node that never comes): the caller gets its
timeout error when the limit passes, and the call finishes on its own thread.
The limit starts when the call starts: there is no pool of threads in front of
provider calls, so a provision never waits behind others and never spends its
limit in a queue. How many run at once is bounded by what bounds sandbox calls
(the HTTP worker threads) and by capacity (each provision holds a slot first).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

from runtime.core.errors import ProvisioningTimeout, ResumeTimeout, SiestaError

_T = TypeVar("_T")


def within_limit(
    action: Callable[[_T], object],
    argument: _T,
    limit: float,
    timeout_error: Callable[[float], SiestaError],
    cleanup: Callable[[], None] | None = None,
) -> None:
    """``action(argument)``, waited for at most ``limit`` seconds from its start.

    Past the limit ``timeout_error(limit)`` is raised; the call goes on, and
    ``cleanup`` runs once it ends (whatever it made is removed then).
    """
    future: concurrent.futures.Future[object] = concurrent.futures.Future()

    def run() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(action(argument))
        except BaseException as error:
            future.set_exception(error)

    threading.Thread(target=run, name="siesta-provision", daemon=True).start()
    try:
        future.result(timeout=limit)
    except concurrent.futures.TimeoutError:
        if cleanup is not None:
            future.add_done_callback(lambda _: cleanup())
        raise timeout_error(limit) from None


def provision_timeout(limit: float) -> SiestaError:
    msg = f"provisioning the sandbox took longer than the limit of {limit:g} seconds"
    return ProvisioningTimeout(msg, limit=limit, unit="seconds")


def resume_timeout(limit: float) -> SiestaError:
    msg = f"resuming the sandbox took longer than the limit of {limit:g} seconds"
    return ResumeTimeout(msg, limit=limit, unit="seconds")
