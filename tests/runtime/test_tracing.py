"""The tracing module on its own: no-op by default, context carried onto pool
threads, and the exporters chosen by ``SIESTA_TRACING__*``."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from runtime.core import tracing
from runtime.core.context import CallContext
from runtime.core.errors import ConfigurationError, SessionBusy
from runtime.core.logs import JsonFormatter
from runtime.core.settings import TracingSettings
from runtime.core.tracing_export import start_tracing
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.providers.fake import FakeProvider
from runtime.services import assemble_sessions
from runtime.settings import Settings
from runtime.store.sqlite import open_sqlite

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)
    provider.shutdown()


def test_without_a_provider_spans_record_nothing_but_the_context_passes_on() -> None:
    headers: dict[str, str] = {}
    with (
        tracing.span("outer", org="o") as outer,
        trace.use_span(trace.NonRecordingSpan(_context_of(TRACEPARENT))),
        tracing.span("inner"),
    ):
        tracing.inject(headers)
    assert not outer.is_recording()
    assert headers == {"traceparent": TRACEPARENT}


def test_logs_name_the_callers_trace() -> None:
    record = logging.LogRecord("siesta", logging.INFO, __file__, 1, "hello", None, None)
    outside = json.loads(JsonFormatter().format(record))
    token = otel_context.attach(tracing.extract({"traceparent": TRACEPARENT}))
    try:
        inside = json.loads(JsonFormatter().format(record))
    finally:
        otel_context.detach(token)
    assert "traceId" not in outside
    assert inside["traceId"] == TRACEPARENT.split("-")[1]


def test_a_span_names_the_error_code_only(exported: InMemorySpanExporter) -> None:
    with pytest.raises(SessionBusy), tracing.span("lease.wait", conversation_key="o/c"):
        raise SessionBusy("busy with 'a secret command'", limit=1.0)  # noqa: EM101

    (span,) = exported.get_finished_spans()
    assert span.attributes == {
        "siesta.conversation_key": "o/c",
        "siesta.outcome": "error",
        "error.type": "session_busy",
    }
    assert span.status.description == "session_busy"
    assert not span.events


def test_carry_runs_a_function_on_a_pool_thread_in_the_callers_trace(
    exported: InMemorySpanExporter,
) -> None:
    def child(_: int) -> None:
        with tracing.span("child"):
            pass

    with tracing.span("parent") as parent, ThreadPoolExecutor(3) as pool:
        list(pool.map(tracing.carry(child), range(3)))

    children = [span for span in exported.get_finished_spans() if span.name == "child"]
    assert len(children) == 3
    assert all(span.parent == parent.get_span_context() for span in children)


@pytest.mark.parametrize("tier", ["paused", "stopped"])
def test_a_resume_is_a_span_inside_the_operation(
    tmp_path: Path, exported: InMemorySpanExporter, tier: str
) -> None:
    stores = open_sqlite(tmp_path / "siesta.db")
    provider = FakeProvider(tmp_path / "sandboxes")
    images = ImageCatalog([CatalogImage(id="base", title="B", image="siesta/b:1")], tmp_path)
    sessions, leases, lifecycle, _ = assemble_sessions(stores, provider, images, Settings())
    ctx = CallContext("org", "user", "c1", base_image="base")
    try:
        with sessions.operation(ctx) as first:
            pass
        with leases.hold(ctx.key) as lease:
            suspend = lifecycle.pause if tier == "paused" else lifecycle.stop
            assert suspend(first.record, lease)
        exported.clear()
        with tracing.span("operation") as operation, sessions.operation(ctx) as resumed:
            pass
    finally:
        sessions.close()
        provider.close()
        stores.close()

    spans = {span.name: span for span in exported.get_finished_spans()}
    assert resumed.resumed == tier
    assert spans["session.resume"].parent == operation.get_span_context()
    assert spans["session.resume"].attributes == {
        "siesta.tier": tier,
        "siesta.session_id": first.record.session_id,
    }
    assert "session.provision" not in spans


def test_nothing_is_exported_by_default() -> None:
    assert Settings().tracing.exporter == "none"
    assert start_tracing(TracingSettings()) is None


def test_the_exporter_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIESTA_TRACING__EXPORTER", "otlp")
    monkeypatch.setenv("SIESTA_TRACING__OTLP_ENDPOINT", "http://collector:4318/v1/traces")
    settings = Settings().tracing
    assert (settings.exporter, settings.otlp_endpoint) == (
        "otlp",
        "http://collector:4318/v1/traces",
    )
    monkeypatch.setenv("SIESTA_TRACING__EXPORTER", "jaeger")
    with pytest.raises(ValidationError, match="exporter"):
        Settings()


def test_console_prints_each_span(capsys: pytest.CaptureFixture[str]) -> None:
    shutdown = start_tracing(TracingSettings(exporter="console", service_name="siesta-test"))
    assert shutdown is not None
    with tracing.span("session.provision", org="org-1"):
        pass
    shutdown()

    printed = capsys.readouterr().out
    assert '"name": "session.provision"' in printed
    assert '"siesta.org": "org-1"' in printed
    assert "siesta-test" in printed


def test_otlp_sends_the_spans_to_the_collector() -> None:
    collector = _Collector()
    try:
        shutdown = start_tracing(
            TracingSettings(exporter="otlp", otlp_endpoint=f"{collector.url}/v1/traces")
        )
        assert shutdown is not None
        with tracing.span("sandbox.exec", session_id="s-1"):
            pass
        shutdown()
    finally:
        collector.stop()
    (request,) = collector.requests
    assert request["path"] == "/v1/traces"
    assert request["content-type"] == "application/x-protobuf"
    assert b"sandbox.exec" in request["body"]


def test_otlp_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ConfigurationError, match=r"siesta-runtime\[otlp\]"):
        start_tracing(TracingSettings(exporter="otlp"))


def _context_of(traceparent: str) -> trace.SpanContext:
    return trace.get_current_span(tracing.extract({"traceparent": traceparent})).get_span_context()


class _Collector:
    """An OTLP/HTTP collector that keeps what it is sent."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                requests.append(
                    {
                        "path": self.path,
                        "content-type": self.headers["Content-Type"],
                        "body": body,
                    }
                )
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
