"""The Python client (clients/python) against a real ``siesta-runtime serve`` (fake
provider): every call, sync and async, errors as exceptions, and safe retries."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from siesta_client import (
    ApprovalRequired,
    AsyncSiestaClient,
    Conflict,
    ConnectionFailed,
    InvalidRequest,
    NotFound,
    Retries,
    SessionBusy,
    SiestaClient,
)
from tests.helpers import TOKEN, ServiceProcess, StartService, new_conversation

SELF_APPROVING = {
    "SIESTA_TOOLS__FUNCTION_POLICIES": "{}",  # publishing asks first (the default)
    "SIESTA_TOOLS__ALLOW_SELF_APPROVAL": "true",
}
AGENT = {"id": "agent-1", "systemToolIds": ["sandbox"], "baseImage": "debian-base"}
USER = {"id": "user-1", "role": "User"}
APPEND = "echo ran >> runs.txt; wc -l < runs.txt"
FAST = Retries(attempts=3, backoff_seconds=0.01)


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    return start_service("fake", **SELF_APPROVING)


def test_the_sync_client_covers_the_file_workflow(service: ServiceProcess) -> None:
    with SiestaClient(service.base_url, TOKEN) as siesta:
        conv = siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        upload = conv.upload_file("sales.csv", b"region,amount\nnorth, 10\nsouth,\n", "text/csv")
        assert upload.name == "sales.csv"
        result = conv.run_command(
            'grep -v ",$" in/sales.csv | tr -d " " > cleaned.csv', files=["sales.csv"]
        )
        assert result.exitCode == 0 and result.stagedFiles[0].path == "/mnt/work/in/sales.csv"
        assert conv.read_file("cleaned.csv").content == "region,amount\nnorth,10\n"
        conv.write_file("big.txt", "abcdefghij" * 10)
        pages = list(conv.read_pages("big.txt", max_bytes=30))
        assert len(pages) == 4 and "".join(p.content for p in pages) == "abcdefghij" * 10
        names = [entry.name for entry in conv.list_files().entries]
        assert {"big.txt", "cleaned.csv", "in"} <= set(names)

        with pytest.raises(ApprovalRequired) as held:
            conv.publish_files(["cleaned.csv"])
        assert held.value.status == 202 and held.value.approval_id
        waiting = siesta.tools.approvals(org="org-a", conversation=conv.id)
        assert [a.approvalId for a in waiting.approvals] == [held.value.approval_id]
        shown = siesta.tools.approval(held.value.approval_id, org="org-a")
        assert shown.function == "publishFiles" and shown.arguments == {"paths": ["cleaned.csv"]}
        decided = siesta.tools.decide(held.value.approval_id, org="org-a", approve=True, by="u1")
        assert decided.ok
        artifact = next(f for f in conv.files().files if f.kind == "artifact")
        assert conv.download_file(artifact.id) == b"region,amount\nnorth,10\n"

        assert conv.run_js("1 + 1").result == "2"
        assert conv.sandbox().state == "running"
        assert conv.delete().deleted is True


def test_errors_are_exceptions_with_their_code(service: ServiceProcess) -> None:
    with SiestaClient(service.base_url, TOKEN) as siesta:
        conv = siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        with pytest.raises(NotFound) as missing:
            conv.read_file("nope.txt")
        assert missing.value.code == "file_not_found" and missing.value.status == 404
        conv.write_file("a.txt", "abc")
        with pytest.raises(Conflict) as past_end:
            conv.read_file("a.txt", offset=10)
        assert past_end.value.code == "offset_past_end"
        outside = siesta.conversation("x", org="org-a", user="user-1")
        with pytest.raises(InvalidRequest) as no_image:
            outside.run_command("true")
        assert no_image.value.code == "image_required"


def test_the_tool_layer(service: ServiceProcess) -> None:
    conversation = new_conversation()
    with SiestaClient(service.base_url, TOKEN) as siesta:
        catalog = siesta.tools.catalog(AGENT, USER, org="org-client")
        assert "runCommand" in [f.name for f in catalog.functions]
        strict = siesta.tools.catalog(AGENT, USER, schema_mode="strict", org="org-client")
        run = next(f for f in strict.functions if f.name == "runCommand").parameters
        assert run["required"] == ["command", "timeoutSeconds", "files"]
        outcome = siesta.tools.execute(
            org="org-a",
            conversation=conversation,
            agent=AGENT,
            user=USER,
            function="runCommand",
            arguments={"command": "echo via tools"},
        )
        assert outcome.ok and outcome.result["stdout"] == "via tools\n"
        log = siesta.tools.executions(org="org-a", conversation=conversation)
        assert [e.function for e in log.executions] == ["runCommand"]


def test_a_registered_agent_binds_the_conversations_calls(service: ServiceProcess) -> None:
    careful = {**AGENT, "id": "careful", "functionPolicies": {"runCommand": "confirm"}}
    with SiestaClient(service.base_url, TOKEN) as siesta:
        registered = siesta.agents.register(careful, org="org-a")
        assert registered.agent.function_policies == {"runCommand": "confirm"}
        assert [a.agent.id for a in siesta.agents.list(org="org-a").agents] == ["careful"]
        conv = siesta.conversation(
            new_conversation(), org="org-a", user="u1", base_image="debian-base", agent="careful"
        )
        with pytest.raises(ApprovalRequired):
            conv.run_command("echo held")
        siesta.agents.delete("careful", org="org-a")
        with pytest.raises(NotFound):
            siesta.agents.get("careful", org="org-a")
        assert conv.run_command("echo ran").stdout == "ran\n"  # the floors again


def test_the_async_client(service: ServiceProcess) -> None:
    async def scenario() -> None:
        async with AsyncSiestaClient(service.base_url, TOKEN) as siesta:
            conv = siesta.conversation(
                new_conversation(), org="org-a", user="user-1", base_image="debian-base"
            )
            first, second = await asyncio.gather(
                conv.run_command("echo one"), conv.write_file("w.txt", "two")
            )
            assert first.stdout == "one\n" and second.size == 3
            pages = [page.content async for page in conv.read_pages("w.txt")]
            assert pages == ["two"]
            with pytest.raises(ApprovalRequired):
                await conv.publish_files(["w.txt"])
            outcome = await siesta.tools.execute(
                org="org-a",
                conversation=conv.id,
                agent=AGENT,
                user=USER,
                function="listFiles",
                arguments={},
            )
            assert outcome.ok
            assert (await conv.delete()).deleted is True
            registered = await siesta.agents.register(AGENT, org="org-async")
            assert (await siesta.agents.get("agent-1", org="org-async")) == registered
            await siesta.agents.delete("agent-1", org="org-async")
            assert (await siesta.agents.list(org="org-async")).agents == []

    asyncio.run(scenario())


class LoseFirstAnswer(httpx.BaseTransport):
    """The first POST reaches the service (it runs), then its answer is lost."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.sent: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.headers.get("idempotency-key"))
        response = self.inner.handle_request(request)
        if request.method == "POST" and len(self.sent) == 1:
            response.read()
            response.close()
            msg = "connection reset after the request was sent"
            raise httpx.ReadError(msg, request=request)
        return response

    def close(self) -> None:
        self.inner.close()


def test_a_lost_answer_is_retried_and_the_command_ran_once(service: ServiceProcess) -> None:
    transport = LoseFirstAnswer()
    with SiestaClient(service.base_url, TOKEN, transport=transport, retries=FAST) as siesta:
        conv = siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        assert conv.run_command(APPEND).stdout == "1\n"
        assert transport.sent[0] == transport.sent[1] and transport.sent[0]
        assert conv.read_file("runs.txt").content == "ran\n"  # it ran once


class AsyncUnavailableFirst(httpx.AsyncBaseTransport):
    """Answers 503 once without forwarding (a proxy's "try again"), then forwards."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls == 1:
            return httpx.Response(503, json={"error": {"code": "state_unavailable"}})
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_the_async_client_retries_a_503(service: ServiceProcess) -> None:
    async def scenario() -> None:
        transport = AsyncUnavailableFirst()
        async with AsyncSiestaClient(
            service.base_url, TOKEN, transport=transport, retries=FAST
        ) as siesta:
            conv = siesta.conversation(
                new_conversation(), org="org-a", user="user-1", base_image="debian-base"
            )
            assert (await conv.run_command(APPEND)).stdout == "1\n"
            assert transport.calls == 2

    asyncio.run(scenario())


def test_retries_are_bounded() -> None:
    with SiestaClient("http://127.0.0.1:9", TOKEN, retries=FAST) as siesta:
        conv = siesta.conversation("c", org="o", user="u")
        started = time.monotonic()
        with pytest.raises(ConnectionFailed) as failed:
            conv.run_command("true")
    assert failed.value.limit == 3 and time.monotonic() - started < 5


def test_a_retry_while_the_first_runs_gets_session_busy_past_the_wait(
    start_service: StartService,
) -> None:
    impatient = start_service("fake", SIESTA_IDEMPOTENCY__WAIT_SECONDS="0.3")
    impatient.wait_contract_built()
    conversation = new_conversation()

    async def scenario() -> None:
        async with AsyncSiestaClient(impatient.base_url, TOKEN) as siesta:
            conv = siesta.conversation(
                conversation, org="org-a", user="user-1", base_image="debian-base"
            )
            op_key = "same-key-for-both"
            from siesta_client import _calls

            op = _calls.run_command(conv.context, conv.id, "sleep 1.5", None, None)
            first = asyncio.ensure_future(siesta.call(op, idempotency_key=op_key))
            await asyncio.sleep(0.3)
            with pytest.raises(SessionBusy) as busy:
                await siesta.call(op, idempotency_key=op_key)
            assert busy.value.limit == 0.3 and busy.value.unit == "seconds"
            assert (await first).exitCode == 0

    asyncio.run(scenario())
