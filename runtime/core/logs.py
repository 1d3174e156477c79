"""Structured JSON logs, one object per line, with request, conversation and session ids
(and the trace id, when the request came with a trace or tracing is on).

The ids come from context variables set at the edge (the API middleware) and
by the session manager; command text and file content are never logged above
debug level.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time

from runtime.core import tracing

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
CONVERSATION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "conversation", default=None
)
SESSION_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("session_id", default=None)
CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("caller", default=None)
"""The name of the token the request came with."""


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, variable in (
            ("requestId", REQUEST_ID),
            ("conversation", CONVERSATION),
            ("sessionId", SESSION_ID),
            ("caller", CALLER),
        ):
            value = variable.get()
            if value is not None:
                entry[name] = value
        trace_id = tracing.current_trace_id()
        if trace_id is not None:
            entry["traceId"] = trace_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: int = logging.INFO) -> None:
    """JSON lines on stderr for everything, uvicorn's loggers included."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
