"""Every E2B route and every envd Connect method, called by tenant B (its own org-bound
key, its own sandbox's access token) against tenant A's sandbox and snapshot: every
one answers B's own (empty of A) or refuses, nothing of A's is in an answer, and A's
sandbox and file are unchanged. The list of calls is ``api/inventory.py``'s, so a new
E2B route or method is probed the day it lands."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from api.inventory import E2B_ROUTES, E2B_RPC
from tests.e2b.conftest import ORG_A, TOKEN_A, TOKEN_B, E2bService

MARKER = f"tenant-a-secret-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Made:
    sandbox_id: str
    access_token: str


@dataclass(frozen=True)
class TenantA:
    sandbox: Made
    snapshot_id: str


def create(client: httpx.Client, key: str) -> Made:
    made = client.post("/sandboxes", headers={"X-API-Key": key}, json={"templateID": "base"})
    assert made.status_code == 201, made.text
    return Made(made.json()["sandboxID"], made.json()["envdAccessToken"])


def envd(made: Made, token: str | None = None) -> dict[str, str]:
    return {"E2b-Sandbox-Id": made.sandbox_id, "X-Access-Token": token or made.access_token}


@pytest.fixture(scope="module")
def api(e2b: E2bService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=e2b.api_url, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def tenant_a(api: httpx.Client) -> Iterator[TenantA]:
    a = create(api, TOKEN_A)
    written = api.post(
        "/envd/files",
        params={"path": "secret.txt"},
        headers={**envd(a), "Content-Type": "application/octet-stream"},
        content=MARKER.encode(),
    )
    assert written.status_code == 200, written.text
    snapshot = api.post(f"/sandboxes/{a.sandbox_id}/snapshots", headers={"X-API-Key": TOKEN_A})
    assert snapshot.status_code == 201, snapshot.text
    yield TenantA(a, snapshot.json()["snapshotID"])
    api.delete(f"/sandboxes/{a.sandbox_id}", headers={"X-API-Key": TOKEN_A})
    api.delete(f"/templates/{snapshot.json()['snapshotID']}", headers={"X-API-Key": TOKEN_A})


@pytest.fixture(scope="module")
def tenant_b(api: httpx.Client) -> Iterator[Made]:
    b = create(api, TOKEN_B)
    yield b
    api.delete(f"/sandboxes/{b.sandbox_id}", headers={"X-API-Key": TOKEN_B})


OWN = {
    ("POST", "/sandboxes"),
    ("POST", "/v2/sandboxes"),
    ("GET", "/sandboxes"),
    ("GET", "/v2/sandboxes"),
    ("GET", "/sandboxes/metrics"),
    ("GET", "/snapshots"),
}
"""Routes that answer B with B's own (a new sandbox of B's, B's lists)."""
BODIES: dict[str, Any] = {
    "/sandboxes": {"templateID": "base"},
    "/timeout": {"timeout": 30},
    "/connect": {"timeout": 30},
    "/network": {"allowOut": ["example.com"]},
    "/snapshots": {},
    "/fork": {},
}


@pytest.mark.parametrize("route", sorted(E2B_ROUTES), ids=lambda r: f"{r[0]} {r[1]}")
def test_tenant_b_never_reaches_tenant_a_through_e2b(
    api: httpx.Client, tenant_a: TenantA, tenant_b: Made, route: tuple[str, str]
) -> None:
    method, path = route
    a = tenant_a.sandbox
    url = path.replace("{sandbox_id}", a.sandbox_id).replace("{template_id}", tenant_a.snapshot_id)
    body = next((b for tail, b in BODIES.items() if path.endswith(tail)), None)
    if path.startswith("/envd/"):  # A's sandbox id with B's own sandbox's access token
        params = {"path": "secret.txt"} if path == "/envd/files" else {}
        answer = api.request(
            method, url, headers=envd(a, tenant_b.access_token), params=params, content=b"x"
        )
        assert answer.status_code == 401, answer.text
    else:
        params = {"sandbox_ids": a.sandbox_id} if path.endswith("/metrics") else {}
        answer = api.request(
            method,
            url,
            headers={"X-API-Key": TOKEN_B},
            json=body if method in ("POST", "PUT") else None,
            params=params,
        )
        if route in OWN:
            assert answer.status_code < 300, answer.text
            made = answer.json() if method == "POST" else None
            if made is not None:  # B's own new sandbox: gone again
                api.delete(f"/sandboxes/{made['sandboxID']}", headers={"X-API-Key": TOKEN_B})
        else:
            assert answer.status_code in (403, 404), answer.text
    for secret in (MARKER, a.access_token):  # the ids B named may be echoed
        assert secret not in answer.text
    assert_a_unchanged(api, tenant_a)


@pytest.mark.parametrize("method", sorted(E2B_RPC))
def test_tenant_b_never_reaches_tenant_a_through_envd(
    api: httpx.Client, tenant_a: TenantA, tenant_b: Made, method: str
) -> None:
    a = tenant_a.sandbox
    answer = api.post(
        f"/envd/{method}",
        headers={**envd(a, tenant_b.access_token), "Content-Type": "application/json"},
        json={"path": "secret.txt"},
    )
    assert answer.status_code == 401, answer.text
    assert MARKER not in answer.text and a.access_token not in answer.text
    assert_a_unchanged(api, tenant_a)


def test_tenant_b_bound_token_cannot_name_org_a_on_v1(e2b: E2bService, tenant_a: TenantA) -> None:
    """The same sandbox as a conversation: B's key is bound to its org on /v1 too."""
    answer = httpx.post(
        f"{e2b.service.base_url}/v1/conversations/{tenant_a.sandbox.sandbox_id}/sandbox/readFile",
        headers={"Authorization": f"Bearer {TOKEN_B}", "X-Siesta-Org": ORG_A, "X-Siesta-User": "x"},
        json={"path": "/home/user/secret.txt"},
    )
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["code"] == "org_not_allowed"
    assert MARKER not in answer.text


def assert_a_unchanged(api: httpx.Client, a: TenantA) -> None:
    info = api.get(f"/sandboxes/{a.sandbox.sandbox_id}", headers={"X-API-Key": TOKEN_A})
    assert info.status_code == 200 and info.json()["state"] == "running", info.text
    read = api.get("/envd/files", params={"path": "secret.txt"}, headers=envd(a.sandbox))
    assert read.status_code == 200 and read.text == MARKER, read.text
    snapshots = api.get("/snapshots", headers={"X-API-Key": TOKEN_A}).json()
    assert a.snapshot_id in {s["snapshotID"] for s in snapshots}
