"""Traces over HTTP (the app in this process, the fake provider): the caller's trace
context is continued, the slow parts are child spans, ``traceparent`` goes on to
upstream APIs and the agent gateway, and no span holds an argument's value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from runtime.core import tracing
from tests.agent_server import AgentServer
from tests.fake_apis import FakeApis
from tests.helpers import headers, new_conversation
from tests.inprocess import InProcessService, in_process_service

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SECRET = "s3cr3t-argument-value"
EXPORTED = InMemorySpanExporter()


@pytest.fixture(scope="module")
def provider() -> Iterator[TracerProvider]:
    """This module's spans, exported as they end (the global provider stays unset)."""
    installed = TracerProvider()
    installed.add_span_processor(SimpleSpanProcessor(EXPORTED))
    tracing.install(installed)
    yield installed
    tracing.install(None)
    installed.shutdown()


@pytest.fixture(scope="module")
def apis() -> Iterator[FakeApis]:
    server = FakeApis()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def agents() -> Iterator[AgentServer]:
    server = AgentServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def service(
    provider: TracerProvider,
    apis: FakeApis,
    agents: AgentServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_AGENTS__GATEWAY__TYPE": "http",
        "SIESTA_AGENTS__GATEWAY__BACKEND_URL": f"{agents.url}/subagents",
        "SIESTA_TOOLS__GOOGLE_BASE_URL": apis.url,
        "SIESTA_TOOLS__GOOGLE_API_KEY": "good-key",
        "SIESTA_TOOLS__GOOGLE_CX": "cx-1",
        "SIESTA_TOOLS__ALLOW_PRIVATE_NETWORKS": "true",
    }
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


@pytest.fixture
def spans(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    EXPORTED.clear()
    yield EXPORTED
    EXPORTED.clear()


def traced(**extra: str) -> dict[str, str]:
    return {**headers(), "traceparent": TRACEPARENT, **extra}


def of_trace(exported: InMemorySpanExporter) -> list[ReadableSpan]:
    found = [
        span
        for span in exported.get_finished_spans()
        if span.context is not None and f"{span.context.trace_id:032x}" == TRACE_ID
    ]
    assert found, [span.name for span in exported.get_finished_spans()]
    return found


def named(found: list[ReadableSpan], name: str) -> ReadableSpan:
    matching = [span for span in found if span.name == name]
    assert len(matching) == 1, [span.name for span in found]
    return matching[0]


def server_span(found: list[ReadableSpan]) -> ReadableSpan:
    servers = [span for span in found if span.kind is SpanKind.SERVER]
    assert len(servers) == 1, [span.name for span in found]
    return servers[0]


def parent_id(span: ReadableSpan) -> str | None:
    return f"{span.parent.span_id:016x}" if span.parent is not None else None


def span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"


def descends_from(span: ReadableSpan, ancestor: ReadableSpan, found: list[ReadableSpan]) -> bool:
    by_id = {span_id(s): s for s in found}
    current: ReadableSpan | None = span
    while current is not None:
        up = parent_id(current)
        if up == span_id(ancestor):
            return True
        current = by_id.get(up) if up is not None else None
    return False


def header(request: dict[str, Any], name: str) -> str | None:
    return next((v for k, v in request["headers"].items() if k.lower() == name), None)


def run_command(service: InProcessService, conversation: str, command: str) -> Any:
    response = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": command},
        headers=traced(),
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_the_server_span_continues_the_callers_trace(
    service: InProcessService, spans: InMemorySpanExporter
) -> None:
    conversation = new_conversation()
    response = service.client.get(f"/v1/conversations/{conversation}/sandbox", headers=traced())

    server = server_span(of_trace(spans))
    assert response.status_code in (200, 404)
    assert parent_id(server) == PARENT_ID
    assert server.name == "GET /v1/conversations/{conversation_id}/sandbox"
    assert server.attributes is not None
    assert server.attributes["siesta.org"] == "org-a"
    assert server.attributes["siesta.conversation"] == conversation
    assert server.attributes["http.response.status_code"] == response.status_code


def test_without_a_traceparent_a_request_starts_its_own_trace(
    service: InProcessService, spans: InMemorySpanExporter
) -> None:
    service.client.get("/healthz")

    (server,) = spans.get_finished_spans()
    assert server.kind is SpanKind.SERVER and server.parent is None


def test_run_command_spans_lease_wait_provisioning_and_exec(
    service: InProcessService, spans: InMemorySpanExporter
) -> None:
    conversation = new_conversation()
    first = run_command(service, conversation, f"echo {SECRET}")
    first_spans = of_trace(spans)
    spans.clear()
    run_command(service, conversation, "true")
    second_spans = of_trace(spans)

    server = server_span(first_spans)
    for name in ("lease.wait", "session.provision", "sandbox.stage", "sandbox.exec"):
        assert descends_from(named(first_spans, name), server, first_spans), name
    exec_span = named(first_spans, "sandbox.exec")
    assert exec_span.attributes is not None
    assert exec_span.attributes["siesta.session_id"] == first["sessionId"]
    assert exec_span.attributes["siesta.exit_code"] == 0
    tool = named(first_spans, "tool.execute")
    assert tool.attributes is not None
    assert tool.attributes["siesta.function"] == "runCommand"
    assert tool.attributes["siesta.outcome"] == "ok"
    names = {span.name for span in second_spans}
    assert {"lease.wait", "sandbox.exec"} <= names
    assert "session.provision" not in names  # the session is reused
    assert_no_secret(first_spans)


def test_a_failed_call_says_its_code_not_its_message(
    service: InProcessService, spans: InMemorySpanExporter
) -> None:
    response = service.client.post(
        f"/v1/conversations/{new_conversation()}/sandbox/readFile",
        json={"path": f"../{SECRET}"},
        headers=traced(),
    )

    tool = named(of_trace(spans), "tool.execute")
    assert response.status_code == 422, response.text
    assert tool.attributes is not None
    assert tool.attributes["error.type"] == response.json()["error"]["code"]
    assert tool.status.description == response.json()["error"]["code"]
    assert_no_secret(of_trace(spans))


def test_a_script_is_a_js_span(service: InProcessService, spans: InMemorySpanExporter) -> None:
    conversation = new_conversation()
    response = service.client.post(
        f"/v1/conversations/{conversation}/js",
        json={"code": f"'{SECRET}'.length"},
        headers=traced(),
    )

    found = of_trace(spans)
    js = named(found, "js.run")
    assert response.status_code == 200, response.text
    assert descends_from(js, server_span(found), found)
    assert js.attributes is not None
    assert js.attributes["siesta.conversation"] == conversation
    assert js.attributes["siesta.outcome"] == "ok"
    assert_no_secret(found)


def test_sub_agent_calls_carry_the_trace_to_the_gateway(
    service: InProcessService, agents: AgentServer, spans: InMemorySpanExporter
) -> None:
    agents.requests.clear()
    response = service.client.post(
        f"/v1/conversations/{new_conversation()}/js",
        json={"code": f"callAgentsParallel(['echo', 'echo'], ['{SECRET}', 'two']).length"},
        headers=traced(**{"X-Siesta-Sub-Agents": "echo"}),
    )

    found = of_trace(spans)
    upstream = [span for span in found if span.name == "upstream agents"]
    assert response.status_code == 200, response.text
    assert response.json()["result"] == "2", response.text
    assert len(upstream) == 2  # each from a thread of its own, in the same trace
    sent = {header(request, "traceparent") for request in agents.requests}
    assert sent == {f"00-{TRACE_ID}-{span_id(span)}-01" for span in upstream}
    assert all(descends_from(span, named(found, "js.run"), found) for span in upstream)
    assert_no_secret(found)


def test_an_upstream_adapter_call_is_a_span_and_carries_the_trace(
    service: InProcessService, apis: FakeApis, spans: InMemorySpanExporter
) -> None:
    apis.requests.clear()
    response = service.client.post(
        "/v1/tools/execute",
        headers=traced(),
        json={
            "conversationId": new_conversation(),
            "agent": {
                "id": "agent-1",
                "systemToolIds": ["google_search"],
                "systemConnectionIds": {"google_search": "system-google-search"},
            },
            "user": {"id": "user-1", "role": "User"},
            "function": "GoogleSearch.Search",
            "arguments": {"query": SECRET, "count": 1},
        },
    )

    found = of_trace(spans)
    upstream = named(found, "upstream google")
    search = next(r for r in apis.requests if r["path"] == "/customsearch/v1")
    page = next(r for r in apis.requests if r["path"] == "/pages/a")
    assert response.json()["ok"] is True, response.text
    assert upstream.kind is SpanKind.CLIENT
    assert upstream.attributes is not None
    assert upstream.attributes["http.response.status_code"] == 200
    assert descends_from(upstream, named(found, "tool.execute"), found)
    assert header(search, "traceparent") == f"00-{TRACE_ID}-{span_id(upstream)}-01"
    assert named(found, "upstream pages-any-address")  # fetched on a thread of the pool
    assert header(page, "traceparent") is None  # a page a model named is not told
    assert_no_secret(found)


def test_a_call_without_tracing_still_passes_the_callers_trace_on(
    service: InProcessService, agents: AgentServer, provider: TracerProvider
) -> None:
    tracing.install(None)  # the API's no-op tracer, as when nothing is configured
    try:
        agents.requests.clear()
        response = service.client.post(
            f"/v1/conversations/{new_conversation()}/js",
            json={"code": "callAgent('echo', 'hi')"},
            headers=traced(**{"X-Siesta-Sub-Agents": "echo"}),
        )
    finally:
        tracing.install(provider)
    assert response.status_code == 200, response.text
    assert header(agents.requests[-1], "traceparent") == TRACEPARENT


def assert_no_secret(found: list[ReadableSpan]) -> None:
    for span in found:
        values = [*(span.attributes or {}).values(), span.name, span.status.description or ""]
        values += [value for event in span.events for value in (event.attributes or {}).values()]
        assert not any(SECRET in str(value) for value in values), span.name


def test_a_streamed_command_is_traced_to_the_end_of_its_stream(
    service: InProcessService, spans: InMemorySpanExporter
) -> None:
    with service.client.stream(
        "POST",
        f"/v1/conversations/{new_conversation()}/sandbox/runCommand",
        json={"command": "echo one; echo two"},
        headers=traced(Accept="text/event-stream"),
    ) as response:
        body = response.read().decode()

    found = of_trace(spans)
    server = server_span(found)
    exec_span = named(found, "sandbox.exec")
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "event: result" in body
    assert descends_from(exec_span, server, found)
    assert exec_span.end_time is not None and server.end_time is not None
    assert server.end_time >= exec_span.end_time


def test_publishing_is_a_span(service: InProcessService, spans: InMemorySpanExporter) -> None:
    conversation = new_conversation()
    written = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/writeFile",
        json={"path": "out.txt", "content": SECRET},
        headers=headers(),
    )
    response = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/publishFiles",
        json={"paths": ["out.txt", "missing.txt"]},
        headers=traced(),
    )

    publish = named(of_trace(spans), "sandbox.publish")
    assert written.status_code == 200 and response.status_code == 200, response.text
    assert publish.attributes is not None
    assert (publish.attributes["siesta.files"], publish.attributes["siesta.failed"]) == (2, 1)
    assert_no_secret(of_trace(spans))
