"""Hostile bytes in every header the faces read never make a 5xx: non-ASCII latin-1
bytes, UTF-8 that is not ASCII, 10 KB values and control characters, sent to a
representative route of each face (the fake provider, in this process)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import TOKEN, new_conversation
from tests.inprocess import InProcessService, in_process_service

DOMAIN = "ports.test"
API = Path(__file__).resolve().parents[2] / "api"
HOSTILE = {
    "latin-1": "d\xe9j\xe0 \xff".encode("latin-1"),
    "utf-8": "žluťoučký kůň".encode(),
    "10 KB": b"a" * 10_000,
    "control": b"a\x01b\x1b[31m\x7f",
}
HEADERS_READ = (
    "authorization",
    "x-siesta-org",
    "x-siesta-user",
    "x-siesta-agent",
    "x-siesta-base-image",
    "x-siesta-egress-allow",
    "x-siesta-sub-agents",
    "x-siesta-message-id",
    "x-siesta-conversation",
    "x-siesta-port-token",
    "idempotency-key",
    "x-request-id",
    "traceparent",
    "tracestate",
    "accept",
    "content-type",
    "content-encoding",
    "cookie",
    "origin",
    "host",
    "x-api-key",
    "e2b-sandbox-id",
    "x-access-token",
    "e2b-traffic-access-token",
    "keepalive-ping-interval",
    "last-event-id",
    "content-length",
    "transfer-encoding",
)
"""Every header some face reads (``test_every_header_read_is_fuzzed`` keeps it whole)."""
WRITTEN_ONLY = {
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-for",
    "x-forwarded-prefix",
    "x-siesta-egress-refusal",
    "x-next-token",
    "siesta-watcher-dropped",
    "siesta-watcher-limit-bytes",
    "x-content-type-options",
}
"""Header names in the faces' code that they only send."""
BEARER = {
    "Authorization": f"Bearer {TOKEN}",
    "X-Siesta-Org": "org-a",
    "X-Siesta-User": "user-1",
    "X-Siesta-Base-Image": "debian-base",
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_E2B__PORTS_DOMAIN": DOMAIN,
        "SIESTA_E2B__DEFAULT_ORG": "org-a",
    }
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


@pytest.fixture(scope="module")
def e2b_sandbox(service: InProcessService) -> dict[str, str]:
    made = service.client.post(
        "/e2b/sandboxes",
        headers={"X-API-Key": TOKEN},
        json={"templateID": "debian-base", "network": {"allowPublicTraffic": False}},
    )
    assert made.status_code == 201, made.text
    body: dict[str, str] = made.json()
    return body


def _routes(conversation: str, sandbox: dict[str, str]) -> list[tuple[str, str, dict[str, str]]]:
    """(method, url, the headers a good request has) per face."""
    envd = {"E2b-Sandbox-Id": sandbox["sandboxID"], "X-Access-Token": sandbox["envdAccessToken"]}
    return [
        ("GET", "/healthz", {}),
        ("GET", "/metrics", {}),
        ("GET", "/v1/images", BEARER),
        ("POST", f"/v1/conversations/{conversation}/sandbox/runCommand", BEARER),
        ("GET", f"/v1/conversations/{conversation}/sandbox", BEARER),
        (
            "GET",
            f"/v1/conversations/{conversation}/sandbox/processes/1",
            {**BEARER, "Accept": "text/event-stream"},
        ),
        ("GET", f"/v1/conversations/{conversation}/ports/8000/", {"X-Siesta-Port-Token": "x"}),
        ("GET", "/e2b/sandboxes", {"X-API-Key": TOKEN}),
        ("GET", "/e2b/envd/health", envd),
        ("POST", "/e2b/envd/process.Process/List", {**envd, "Content-Type": "application/json"}),
        ("GET", "/", {"Host": f"8000-{sandbox['sandboxID']}.{DOMAIN}"}),
        ("POST", "/mcp", {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}),
        ("GET", "/console/", {}),
    ]


def test_no_hostile_header_makes_a_5xx(
    service: InProcessService, e2b_sandbox: dict[str, str]
) -> None:
    conversation = new_conversation()
    failures = []
    for method, url, good in _routes(conversation, e2b_sandbox):
        for header in HEADERS_READ:
            for kind, value in HOSTILE.items():
                headers = [(k.lower().encode(), v.encode()) for k, v in good.items()]
                headers = [(k, v) for k, v in headers if k != header.encode()]
                headers.append((header.encode(), value))
                body = b'{"command": "true", "path": "a.txt"}'
                answer = service.client.request(
                    method, url, headers=headers, content=body if method == "POST" else None
                )
                if answer.status_code == 501 and header == "content-encoding" and "envd/" in url:
                    # Connect's own answer to a compression it does not know
                    # ("unimplemented", as its protocol says): not a failure of ours.
                    assert answer.json()["code"] == "unimplemented"
                    continue
                if answer.status_code >= 500:
                    failures.append(f"{method} {url} {header} ({kind}): {answer.status_code}")
    assert failures == []


def test_every_header_read_is_fuzzed() -> None:
    """Header names in the faces' code (``headers.get("x")``, ``Header()`` parameters,
    ``b"x-..."`` constants) are all in ``HEADERS_READ``."""
    read: set[str] = set()
    for module in API.rglob("*.py"):
        if "protocol" in module.parts:
            continue  # generated Connect code
        text = module.read_text()
        read |= set(re.findall(r'headers\.get\(\s*b?"([A-Za-z0-9-]+)"', text))
        read |= {m.replace("_", "-") for m in re.findall(r"\b(x_siesta_[a-z_]+): Annotated", text)}
        read |= set(re.findall(r'"((?:e2b|x)-[a-z0-9-]+)"', text))
    read = {name.lower() for name in read if not name.endswith("-")} - WRITTEN_ONLY
    assert read - set(HEADERS_READ) == set()


@pytest.mark.parametrize("given", [*HOSTILE.values(), b"", b"a b", b"x" * 65])
def test_a_request_id_not_in_its_form_is_replaced(service: InProcessService, given: bytes) -> None:
    answer = service.client.get("/healthz", headers=[(b"x-request-id", given)])
    kept = answer.headers["x-request-id"]
    assert kept != given.decode("latin-1")
    assert re.fullmatch(r"[0-9a-f]{32}", kept)


def test_a_request_id_in_its_form_is_kept(service: InProcessService) -> None:
    given = "req-1.2:abc_" + "x" * 52  # 64 characters
    answer = service.client.get("/healthz", headers={"X-Request-Id": given})
    assert answer.headers["x-request-id"] == given


def test_a_sandbox_id_that_is_no_id_is_a_400(service: InProcessService) -> None:
    answer = service.client.get("/e2b/envd/health", headers={"E2b-Sandbox-Id": "a/../b"})
    assert answer.status_code == 400
