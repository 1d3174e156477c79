"""One script on one worker, as the service sees it: a worker is not trusted.

The worker runs model-written code; if V8 were broken, the worker's messages
would be the attacker's. So the service reads them the way it reads a sandbox
agent's: every frame bounded in bytes (``max_worker_message_bytes``) and read by
the script's deadline, every kind and field checked, log and status entries
counted and measured, helper calls counted (``max_helper_calls``). A message the
service does not accept stops that worker (``js_crashed``, saying what was
wrong); the service and other scripts go on. Helper calls go to ``dispatch``,
which checks them against the conversation and the agent's policy exactly as
the HTTP routes do (``helpers.py``).
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.core.errors import JS_CRASHED, JS_MEMORY_LIMIT, JS_TIMEOUT, SiestaError
from runtime.jsexec.protocol import ProtocolError, WorkerTooSlow, receive_by, send_by
from runtime.jsexec.settings import JsSettings

if TYPE_CHECKING:
    from runtime.jsexec.pool import Worker

log = logging.getLogger(__name__)

POLL_SECONDS = 0.02
MAX_HELPER_NAME_CHARS = 64

Dispatch = Callable[[str, list[Any], float], Any]
"""(helper name, arguments, seconds left until the deadline) → value; raises HelperError."""


class HelperError(Exception):
    """A helper refused its arguments or failed: becomes a catchable JS Error
    (with ``code`` as the Error's ``code`` property when given)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ScriptOutcome:
    result: str | None = None
    error: dict[str, Any] | None = None
    logs: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    truncated: dict[str, Any] = field(default_factory=dict)
    duration_ms: int = 0


class Session:
    """The message loop, the deadline and the memory watch of one script."""

    def __init__(
        self,
        worker: Worker,
        settings: JsSettings,
        dispatch: Dispatch,
        on_status: Callable[[str], None],
        outcome: ScriptOutcome,
    ) -> None:
        self.worker = worker
        self.settings = settings
        self.dispatch = dispatch
        self.on_status = on_status
        self.outcome = outcome
        self.log_bytes = 0
        self.status_bytes = 0
        self.dropped_statuses = 0
        self.helper_calls = 0

    def run(self, code: str, deadline: float, timeout: float) -> None:
        s = self.settings
        limits = {
            "maxLogs": s.max_log_entries,
            "maxLogBytes": s.max_log_entry_bytes,
            "maxResultBytes": s.max_result_bytes,
        }
        try:
            send_by(
                self.worker.to_worker, {"type": "run", "code": code, "limits": limits}, deadline
            )
        except (OSError, ProtocolError):
            self._fail(JS_CRASHED, "the JavaScript worker died before the script started")
            return
        try:
            self._loop(deadline)
        except WorkerTooSlow:
            self._timed_out(timeout)
        except ProtocolError as error:
            self._fail(
                JS_CRASHED,
                f"the JavaScript worker sent {error}; it was stopped",
            )
        except OSError:
            self._fail(JS_CRASHED, "the JavaScript worker stopped unexpectedly")

    def _loop(self, deadline: float) -> None:
        s = self.settings
        memory_limit = s.memory_limit_mb * 1024 * 1024
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                msg = "deadline"
                raise WorkerTooSlow(msg)
            readable, _, _ = select.select(
                [self.worker.from_worker], [], [], min(remaining, POLL_SECONDS)
            )
            if self.worker.rss_bytes() > memory_limit:
                self._fail(
                    JS_MEMORY_LIMIT,
                    f"the script used more than the limit of {s.memory_limit_mb} MB",
                    limit=s.memory_limit_mb,
                    unit="MB",
                )
                return
            if not readable:
                continue
            message = receive_by(self.worker.from_worker, deadline, s.max_worker_message_bytes)
            if message is None:
                self._fail(JS_CRASHED, "the JavaScript worker stopped unexpectedly")
                return
            if self._handle(message, deadline):
                return

    def _handle(self, message: dict[str, Any], deadline: float) -> bool:
        kind = message.get("type")
        if kind == "log":
            self._log(_text_field(message, "message"))
        elif kind == "status":
            self._status(_text_field(message, "message"))
        elif kind == "call":
            send_by(self.worker.to_worker, self._call(message, deadline), deadline)
        elif kind == "done":
            self._done(message)
            return True
        else:
            msg = f"a message of unknown type {str(kind)[:32]!r}"
            raise ProtocolError(msg)
        return False

    def _done(self, message: dict[str, Any]) -> None:
        result = message.get("result")
        error = message.get("error")
        dropped = message.get("droppedLogs") or 0
        if result is not None and not isinstance(result, str):
            msg = "a result that is not text"
            raise ProtocolError(msg)
        if not isinstance(dropped, int) or dropped < 0:
            msg = "a count of dropped logs that is not a count"
            raise ProtocolError(msg)
        if result is not None and len(result.encode(errors="surrogatepass")) > (
            self.settings.max_result_bytes
        ):
            msg = f"a result over the limit of {self.settings.max_result_bytes} bytes"
            raise ProtocolError(msg)
        self.outcome.result = result
        self.outcome.error = _script_error(error)
        if dropped:
            self.outcome.truncated["logs"] = True
            self.outcome.truncated["droppedLogs"] = dropped
        if message.get("truncated") is True:
            self.outcome.truncated["result"] = True
            chars = message.get("resultChars")
            self.outcome.truncated["resultChars"] = chars if isinstance(chars, int) else None
            self.outcome.truncated["limitBytes"] = self.settings.max_result_bytes

    def _log(self, text: str) -> None:
        s = self.settings
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if (
            len(self.outcome.logs) >= s.max_log_entries
            or size > s.max_log_entry_bytes
            or self.log_bytes + size > s.max_log_total_bytes
        ):
            self.outcome.truncated["logs"] = True
            return
        self.log_bytes += size
        self.outcome.logs.append(text)

    def _status(self, text: str) -> None:
        """Keep and pass on a status within the count and byte limits; past them
        only count it (a script calling ``logStatus`` in a loop costs no memory)."""
        s = self.settings
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if (
            len(self.outcome.statuses) >= s.max_status_entries
            or size > s.max_log_entry_bytes
            or self.status_bytes + size > s.max_status_total_bytes
        ):
            self.dropped_statuses += 1
            self.outcome.truncated.update(
                statuses=True,
                droppedStatuses=self.dropped_statuses,
                limitStatuses=s.max_status_entries,
                limitStatusBytes=s.max_status_total_bytes,
            )
            return
        self.status_bytes += size
        self.outcome.statuses.append(text)
        self.on_status(text)

    def _call(self, message: dict[str, Any], deadline: float) -> dict[str, Any]:
        helper = message.get("helper")
        args = message.get("args")
        if not isinstance(helper, str) or not 0 < len(helper) <= MAX_HELPER_NAME_CHARS:
            msg = "a helper call without a helper name"
            raise ProtocolError(msg)
        self.helper_calls += 1
        limit = self.settings.max_helper_calls
        try:
            if self.helper_calls > limit:
                msg = f"{helper}: over the limit of {limit} helper calls in one script"
                raise HelperError(msg, "js_helper_call_limit")
            if not isinstance(args, list):
                msg = f"{helper}: arguments must be a list"
                raise HelperError(msg)
            value = self.dispatch(helper, args, max(0.0, deadline - time.monotonic()))
        except HelperError as error:
            return {"type": "reply", "ok": False, "error": str(error), "code": error.code}
        except SiestaError as error:
            failure = f"{helper}: {error.message}"
            return {"type": "reply", "ok": False, "error": failure, "code": error.code}
        except Exception:  # a helper's bug: logged here, never shown to the script
            log.exception("the JS helper %s failed", helper)
            return {"type": "reply", "ok": False, "error": f"{helper}: failed", "code": None}
        return {"type": "reply", "ok": True, "value": value}

    def _timed_out(self, timeout: float) -> None:
        self._fail(
            JS_TIMEOUT,
            f"the script ran past the limit of {timeout:g} seconds",
            limit=timeout,
            unit="seconds",
        )

    def _fail(self, code: str, message: str, **fields: Any) -> None:
        self.outcome.error = {"code": code, "message": message, **fields}


SCRIPT_ERROR_FIELDS = {
    "code": str,
    "message": str,
    "helperCode": str,
    "line": int,
    "column": int,
    "stack": str,
}


def _script_error(error: object) -> dict[str, Any] | None:
    """The script's error as the worker described it, keeping only known fields of
    the right types (a code and a message it must have)."""
    if error is None:
        return None
    if not isinstance(error, dict):
        msg = "an error that is not an object"
        raise ProtocolError(msg)
    kept = {
        name: error[name]
        for name, kind in SCRIPT_ERROR_FIELDS.items()
        if isinstance(error.get(name), kind) and not isinstance(error.get(name), bool)
    }
    if "code" not in kept or "message" not in kept or not kept["code"].startswith("js_"):
        msg = "an error without a js_ code and a message"
        raise ProtocolError(msg)
    return kept


def _text_field(message: dict[str, Any], name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str):
        msg = f"a {message.get('type')} message whose {name} is not text"
        raise ProtocolError(msg)
    return value
