"""E2B's host form checks before it acts: a private sandbox's traffic token is checked
before traffic wakes the sandbox or touches its timeout, and a token of bytes no token
has is a 400, never a 500."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, cast

import pytest

from api.e2b.hosts import TRAFFIC_HEADER, TrafficTokenRefused, _target, traffic_token
from api.errors import status_for
from runtime.core.errors import InvalidHeader, SiestaError
from runtime.core.records import E2bSandbox
from runtime.sandbox.ports.tokens import PortTokens
from runtime.services import Services

PAUSED = E2bSandbox(
    org="org-a",
    sandbox_id="sbx1",
    owner="backend",
    template="base",
    access_token="envd-token",
    started_at=0.0,
    end_at=100.0,
    on_timeout="pause",
    auto_resume=True,
    state="paused",
    public_traffic=False,
)


class E2b:
    """The sandboxes as ``_target`` sees them; ``connect`` is the effect to avoid."""

    def __init__(self) -> None:
        self.connected: list[str] = []

    def find(self, sandbox_id: str) -> E2bSandbox | None:
        return PAUSED if sandbox_id == PAUSED.sandbox_id else None

    def connect(self, org: str, sandbox_id: str, timeout: int | None) -> tuple[E2bSandbox, bool]:
        self.connected.append(sandbox_id)
        return replace(PAUSED, state="running", end_at=999.0), True


def _ask(token: bytes | None) -> tuple[E2b, Any]:
    e2b = E2b()
    services = SimpleNamespace(e2b=e2b, port_tokens=PortTokens(b"k" * 32))
    headers = [(b"host", b"8000-sbx1.ports.test")]
    if token is not None:
        headers.append((TRAFFIC_HEADER.encode(), token))
    scope = {"type": "http", "path": "/", "raw_path": b"/", "query_string": b"", "headers": headers}
    try:
        return e2b, asyncio.run(_target(cast(Services, services), scope, 8000, "sbx1"))
    except SiestaError as error:
        return e2b, error


def _token() -> bytes:
    return traffic_token(PortTokens(b"k" * 32), PAUSED).encode()


@pytest.mark.parametrize("token", [None, b"", b"wrong", b"x" * 10_000])
def test_a_wrong_token_never_wakes_a_private_sandbox(token: bytes | None) -> None:
    e2b, answer = _ask(token)
    assert isinstance(answer, TrafficTokenRefused)
    assert status_for(answer) == 403
    assert e2b.connected == []  # not resumed, its timeout untouched


@pytest.mark.parametrize("token", ["\xe9t\xe9".encode("latin-1"), b"\xff" * 40, "ž".encode()])
def test_a_token_that_is_not_ascii_is_a_400_before_anything(token: bytes) -> None:
    e2b, answer = _ask(token)
    assert isinstance(answer, InvalidHeader)
    assert status_for(answer) == 400
    assert answer.fields["header"] == TRAFFIC_HEADER
    assert e2b.connected == []


def test_the_right_token_wakes_it_and_is_served() -> None:
    e2b, answer = _ask(_token())
    assert not isinstance(answer, SiestaError)
    assert e2b.connected == ["sbx1"]
    assert answer.ctx.conversation == "sbx1"
