"""The Python client's timeouts, streaming and configuration, against a real
``siesta-runtime serve`` (fake provider): a call waits as long as its command may
run, its own timeout says what became of the call and is never retried, output
streams to callbacks."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from siesta_client import (
    AsyncSiestaClient,
    ClientTimeout,
    ConnectionFailed,
    NotFound,
    Retries,
    SiestaClient,
    _calls,
)
from tests.helpers import TOKEN, ServiceProcess, StartService, new_conversation

IMAGE = "debian-base"
QUICK = httpx.Timeout(1.0, connect=5.0)
"""A read timeout shorter than the commands below."""


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    return start_service("fake")


def test_a_commands_timeout_stretches_the_read_timeout(service: ServiceProcess) -> None:
    with SiestaClient(service.base_url, TOKEN, timeout=QUICK) as siesta:
        conv = siesta.conversation(new_conversation(), org="org-a", user="u1", base_image=IMAGE)
        result = conv.run_command("sleep 2; echo done", timeout_seconds=5)
        assert result.exitCode == 0 and result.stdout == "done\n"


class Counting(httpx.BaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def test_the_clients_own_timeout_says_the_command_was_stopped(service: ServiceProcess) -> None:
    transport = Counting()
    with SiestaClient(service.base_url, TOKEN, timeout=QUICK, transport=transport) as siesta:
        conv = siesta.conversation(new_conversation(), org="org-a", user="u1", base_image=IMAGE)
        with pytest.raises(ClientTimeout) as late:
            conv.run_command("sleep 3; echo ran > ran.txt")
        assert late.value.stopped and isinstance(late.value, TimeoutError)
        assert late.value.limit == 1.0 and late.value.unit == "seconds"
        assert "it was stopped" in late.value.message
        assert transport.sent == 1  # never tried again
        time.sleep(3)
        with pytest.raises(NotFound):
            conv.read_file("ran.txt")


def test_a_script_the_service_finishes_may_still_run(service: ServiceProcess) -> None:
    with SiestaClient(service.base_url, TOKEN, timeout=httpx.Timeout(0.3, connect=5)) as siesta:
        conv = siesta.conversation(new_conversation(), org="org-a", user="u1", base_image=IMAGE)
        with pytest.raises(ClientTimeout) as late:
            conv.run_js("const end = Date.now() + 1500; while (Date.now() < end) {}; 1")
        assert not late.value.stopped and "may still be running" in late.value.message


def test_output_streams_to_callbacks(service: ServiceProcess) -> None:
    out: list[tuple[str, float]] = []
    err: list[str] = []
    with SiestaClient(service.base_url, TOKEN) as siesta:
        conv = siesta.conversation(new_conversation(), org="org-a", user="u1", base_image=IMAGE)
        started = time.monotonic()
        result = conv.run_command(
            "echo one; echo oops >&2; sleep 1; echo two",
            on_stdout=lambda text: out.append((text, time.monotonic() - started)),
            on_stderr=err.append,
        )
        took = time.monotonic() - started
    assert result.exitCode == 0 and result.stdout == "one\ntwo\n" and result.stderr == "oops\n"
    assert "".join(text for text, _ in out) == "one\ntwo\n" and err == ["oops\n"]
    assert out[0][1] < took - 0.5  # the first line came before the command ended


def test_a_streamed_error_is_the_same_exception(service: ServiceProcess) -> None:
    async def scenario() -> None:
        async with AsyncSiestaClient(service.base_url, TOKEN) as siesta:
            conv = siesta.conversation(new_conversation(), org="org-a", user="u1", base_image=IMAGE)
            op = _calls.run_command(
                conv.context, conv.id, "true", ["nope.csv"], None, on_stdout=print
            )
            for _ in range(2):  # streamed, then the kept answer replayed as JSON
                with pytest.raises(NotFound) as missing:
                    await siesta.call(op, idempotency_key="streamed-error")
                assert missing.value.status == 404 and missing.value.code == "missing_input"

    asyncio.run(scenario())


def test_the_async_client_stretches_and_streams(service: ServiceProcess) -> None:
    async def scenario() -> None:
        chunks: list[str] = []
        async with AsyncSiestaClient(service.base_url, TOKEN, timeout=QUICK) as siesta:
            conv = siesta.conversation(new_conversation(), org="org-a", user="u1", base_image=IMAGE)
            result = await conv.run_command(
                "sleep 2; echo late", timeout_seconds=5, on_stdout=chunks.append
            )
            assert result.stdout == "late\n" and chunks == ["late\n"]
            with pytest.raises(ClientTimeout) as late:
                await conv.run_command("sleep 3")
            assert late.value.stopped

    asyncio.run(scenario())


def test_the_address_and_token_come_from_the_environment(
    service: ServiceProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIESTA_URL", raising=False)
    monkeypatch.delenv("SIESTA_API_TOKEN", raising=False)
    with pytest.raises(ValueError, match="SIESTA_URL"):
        SiestaClient()
    monkeypatch.setenv("SIESTA_URL", service.base_url)
    with pytest.raises(ValueError, match="SIESTA_API_TOKEN"):
        AsyncSiestaClient()
    monkeypatch.setenv("SIESTA_API_TOKEN", TOKEN)
    with SiestaClient() as siesta:
        conv = siesta.conversation(new_conversation(), org="org-a", user="u1", base_image=IMAGE)
        assert conv.run_command("echo hi").stdout == "hi\n"


def test_a_mutating_call_lost_after_every_try_says_its_outcome_is_unknown() -> None:
    def reset(request: httpx.Request) -> httpx.Response:
        msg = "connection reset"
        raise httpx.ReadError(msg, request=request)

    fast = Retries(attempts=2, backoff_seconds=0.01)
    transport = httpx.MockTransport(reset)
    with SiestaClient("http://siesta", TOKEN, transport=transport, retries=fast) as siesta:
        conv = siesta.conversation("c", org="o", user="u")
        with pytest.raises(ConnectionFailed) as lost:
            conv.run_command("true")
    assert "whether the call ran is not known" in lost.value.message
    assert lost.value.fields["idempotencyKey"].startswith("siesta-client-")
