"""Traces: W3C trace context in and out, and spans around the slow parts.

Runtime code traces through this module only, on the OpenTelemetry API. Until a
tracer provider is installed (``SIESTA_TRACING__EXPORTER``, see
``tracing_export.py``; tests install their own) spans are the API's no-op ones:
nothing is recorded, yet a caller's ``traceparent`` still reaches the upstream
APIs and the agent gateway.

Span attributes name *what* ran (org, conversation, session, function, policy,
outcome code), never arguments, file content or error messages, which may
quote them.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

__all__ = [
    "Span",
    "SpanKind",
    "carry",
    "current_trace_id",
    "extract",
    "inject",
    "install",
    "outcome",
    "recording",
    "span",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

INSTRUMENTATION = "siesta-runtime"
_PROPAGATOR = TraceContextTextMapPropagator()
_tracer: trace.Tracer = trace.get_tracer(INSTRUMENTATION)
"""Follows the global provider until ``install`` gives this module its own."""
_installed = False


def install(provider: trace.TracerProvider | None) -> None:
    """Trace into ``provider`` from now on (``None``: back to the global one).

    The module keeps its own tracer rather than setting the global provider,
    which OpenTelemetry lets a process set only once."""
    global _tracer, _installed
    _installed = provider is not None
    _tracer = (
        provider.get_tracer(INSTRUMENTATION)
        if provider is not None
        else trace.get_tracer(INSTRUMENTATION)
    )


def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    **attributes: AttributeValue | None,
) -> contextlib.AbstractContextManager[Span]:
    """A span that is current for the block; ``attributes`` become ``siesta.<name>``
    (``None`` values are left out). An exception marks it failed with its code."""
    if not recording():
        # A no-op span would only wrap the current span context again: skip the cost.
        return _CURRENT
    return _recorded(name, kind, attributes)


@contextlib.contextmanager
def _recorded(
    name: str,
    kind: SpanKind,
    attributes: dict[str, AttributeValue | None],
) -> Iterator[Span]:
    given = {f"siesta.{key}": value for key, value in attributes.items() if value is not None}
    with _tracer.start_as_current_span(
        name,
        kind=kind,
        attributes=given,
        record_exception=False,  # its message may quote the arguments
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            outcome(current, _code(exc))
            raise


class _Current(contextlib.AbstractContextManager[Span]):
    """The block runs in the current span, untouched (tracing is off)."""

    def __enter__(self) -> Span:
        return trace.get_current_span()

    def __exit__(self, *_: object) -> None:
        return None


_CURRENT = _Current()


def outcome(current: Span, error_code: str | None) -> None:
    """Record how the span's work ended: ``None`` is success."""
    if error_code is None:
        current.set_attribute("siesta.outcome", "ok")
        return
    current.set_attribute("siesta.outcome", "error")
    current.set_attribute("error.type", error_code)
    current.set_status(StatusCode.ERROR, error_code)


def inject(headers: MutableMapping[str, str]) -> None:
    """Add ``traceparent`` (and ``tracestate``) for the current span to ``headers``."""
    _PROPAGATOR.inject(headers)


def extract(headers: Mapping[str, str]) -> Context:
    """The trace context a caller sent (an empty one when none or malformed)."""
    return _PROPAGATOR.extract(headers)


def current_trace_id() -> str | None:
    """The current trace's id in hex (a caller's even with tracing off), or ``None``."""
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


def carry(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` to run on another thread inside the caller's current trace context
    (a thread pool does not copy context variables the way ``anyio`` does)."""
    captured = otel_context.get_current()

    @functools.wraps(function)
    def within(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        token = otel_context.attach(captured)
        try:
            return function(*args, **kwargs)
        finally:
            otel_context.detach(token)

    return within


def recording() -> bool:
    """Whether spans are recorded (a provider is installed here or globally)."""
    return _installed or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _code(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else type(exc).__name__
