"""The tracer provider behind ``runtime/core/tracing.py`` when an exporter is configured.

Only this module imports the OpenTelemetry SDK, and only when
``SIESTA_TRACING__EXPORTER`` is not ``none``; the OTLP exporter comes with the
``otlp`` extra and is imported only when chosen.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from runtime.core import tracing
from runtime.core.errors import ConfigurationError
from runtime.core.settings import TracingSettings

Shutdown = Callable[[], None]


def start_tracing(settings: TracingSettings) -> Shutdown | None:
    """Install a provider exporting as configured; the returned call flushes and
    uninstalls it. ``None``: nothing to export (spans stay no-ops)."""
    if settings.exporter == "none":
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError as exc:
        package = "opentelemetry-sdk"
        raise _missing(package) from exc
    exporter: SpanExporter
    if settings.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporter = ConsoleSpanExporter(service_name=settings.service_name, out=sys.stdout)
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            package = "opentelemetry-exporter-otlp-proto-http"
            raise _missing(package) from exc
        exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint)
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: settings.service_name}),
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracing.install(provider)

    def shutdown() -> None:
        tracing.install(None)
        provider.shutdown()

    return shutdown


def _missing(package: str) -> ConfigurationError:
    msg = (
        f"SIESTA_TRACING__EXPORTER needs {package}, which is not installed: "
        "pip install 'siesta-runtime[otlp]'"
    )
    return ConfigurationError(msg)
