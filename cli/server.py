"""uvicorn's server, with SIGTERM draining first (``api/drain.py``): ``/readyz`` goes
503 at once, requests go on being served (new ones too) until none is in flight or
the drain time is over, and only then does uvicorn's own shutdown begin (it stops
listening, closes what is left after ``SHUTDOWN_SECONDS``, runs the lifespan's end).

SIGINT (Ctrl-C) stops at once, as uvicorn does; during a drain it ends the drain."""

from __future__ import annotations

import contextlib
import logging
import signal
from types import FrameType

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from api.drain import Drain
from cli.app import app_over
from runtime.settings import Settings

log = logging.getLogger("cli.serve")

SHUTDOWN_SECONDS = 5
"""After a drain: how long uvicorn waits for the requests still open before it
cancels them (only those that outlasted the drain time are left)."""


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, drain: Drain) -> None:
        super().__init__(config)
        self.drain = drain
        self._drain_logged = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self.should_exit:
            self.drain.begin()  # the next tick notices; a handler does no more
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self.drain.draining and not self._drain_logged:
            self._drain_logged = True
            log.info(
                "SIGTERM: draining %d requests in flight (at most %s s); /readyz answers 503",
                self.drain.in_flight,
                self.drain.seconds,
            )
        if self.drain.over() and not self.should_exit:
            log.info("drained (%d requests still in flight): stopping", self.drain.in_flight)
            self.config.timeout_graceful_shutdown = SHUTDOWN_SECONDS
            self.should_exit = True
        return await super().on_tick(counter)


def serve(settings: Settings, host: str, port: int | None) -> int:
    """Serve until stopped; 0, or uvicorn's code for a start that failed."""
    app = app_over(settings)
    config = uvicorn.Config(
        app,
        host=host,
        port=port or settings.http.port,
        timeout_keep_alive=settings.http.idle_connection_seconds,
        log_config=None,  # keep the JSON logging configured by the CLI
    )
    server = DrainingServer(config, app.state.drain)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stopped, as uvicorn.run does
        server.run()
    return 0 if server.started else STARTUP_FAILURE
