"""The console's guards, over HTTP without a browser (the app in this process, fake
provider): who may sign in, what a change needs (session cookie, CSRF token, this
origin), what the store keeps, and that no secret of the settings reaches a page."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.operator_records import AuditFilter
from tests.console.helpers import ADMIN, ADMIN_TOKEN, CONSOLE_TOKENS, TOOLS_TOKEN, browser, sign_in
from tests.helpers import TOKEN
from tests.inprocess import InProcessService, in_process_service

ORG = "org-console"
SECRETS = {
    "SIESTA_TOOLS__OPENAI_API_KEY": "sk-openai-secret-0123456789",
    "SIESTA_TOOLS__GOOGLE_API_KEY": "google-secret-0123456789",
    "SIESTA_TOOLS__PLATFORM_TOKEN": "platform-secret-0123456789",
}
AGENT: dict[str, Any] = {
    "id": "agent-1",
    "systemToolIds": ["sandbox"],
    "baseImage": "debian-base",
    "functionPolicies": {"runCommand": "confirm"},
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_TOKENS": CONSOLE_TOKENS, **SECRETS}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def sandbox(service: InProcessService, conversation: str) -> dict[str, Any]:
    """The conversation's sandbox, made by a command through the API."""
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "X-Siesta-Org": ORG,
        "X-Siesta-User": "user-1",
        "X-Siesta-Base-Image": "debian-base",
    }
    path = f"/v1/conversations/{conversation}/sandbox"
    ran = service.client.post(f"{path}/runCommand", json={"command": "true"}, headers=headers)
    assert ran.status_code == 200, ran.text
    described = service.client.get(path, headers=headers)
    assert described.status_code == 200
    body: dict[str, Any] = described.json()
    return body


def status_of(service: InProcessService, conversation: str) -> str | None:
    record = service.client.app.state.services.stores.sessions.get_session(  # type: ignore[attr-defined]
        ORG, conversation
    )
    return None if record is None else str(record.status.value)


def test_a_token_without_the_admin_scope_cannot_sign_in(service: InProcessService) -> None:
    client = browser(service)
    refusals = ((TOOLS_TOKEN, "does not have the admin scope"), ("nope" * 5, "not a token"))
    for token, says in refusals:
        refused = client.post("/console/sign-in", data={"token": token}, follow_redirects=False)
        assert refused.status_code == 401
        assert says in refused.text
        assert "set-cookie" not in refused.headers
    assert client.get("/console", follow_redirects=False).status_code == 303


def test_the_cookie_is_http_only_strict_and_secure_over_https(service: InProcessService) -> None:
    plain = browser(service).post(
        "/console/sign-in", data={"token": ADMIN_TOKEN}, follow_redirects=False
    )
    tls = browser(service, "https://testserver").post(
        "/console/sign-in", data={"token": ADMIN_TOKEN}, follow_redirects=False
    )

    for response in (plain, tls):
        assert response.status_code == 303 and response.headers["location"] == "/console"
        cookie = response.headers["set-cookie"]
        assert cookie.startswith("siesta_console=")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
        assert "domain" not in cookie.lower()  # this host's only, never its siblings'
    assert "Secure" not in plain.headers["set-cookie"]
    assert "Secure" in tls.headers["set-cookie"]


def test_a_change_without_a_session_is_401_and_changes_nothing(service: InProcessService) -> None:
    sandbox(service, "conv-no-cookie")
    refused = browser(service).post(
        f"/console/sandboxes/{ORG}/conv-no-cookie/delete", data={"csrf": "anything"}
    )
    assert refused.status_code == 401
    assert refused.headers["x-siesta-error"] == "console_sign_in_required"
    assert status_of(service, "conv-no-cookie") == "active"


@pytest.mark.parametrize(
    ("form", "headers", "reason"),
    [
        ({}, {}, "did not send"),
        ({"csrf": "wrong"}, {}, "is not this session"),
        (None, {"Origin": "https://evil.example"}, "another origin"),
        (None, {"Origin": "null"}, "another origin"),
    ],
    ids=["no-csrf", "wrong-csrf", "foreign-origin", "null-origin"],
)
def test_a_change_without_the_csrf_token_or_from_elsewhere_is_403_and_changes_nothing(
    service: InProcessService,
    form: dict[str, str] | None,
    headers: dict[str, str],
    reason: str,
) -> None:
    client = browser(service)
    csrf = sign_in(client)
    conversation = f"conv-csrf-{len(reason)}-{len(headers)}-{len(form or {})}"
    sandbox(service, conversation)
    for action in ("suspend", "delete"):
        refused = client.post(
            f"/console/sandboxes/{ORG}/{conversation}/{action}",
            data=form if form is not None else {"csrf": csrf},
            headers=headers,
        )
        assert refused.status_code == 403
        assert refused.headers["x-siesta-error"] == "csrf_failed"
        assert "csrf_failed" in refused.text and reason in refused.text
        assert refused.headers["content-security-policy"].startswith("default-src 'none'")
    assert status_of(service, conversation) == "active"
    assert client.post("/console/sign-out", data=form or {}, headers=headers).status_code == 403
    assert client.get("/console").url.path == "/console"  # still signed in


def test_the_store_keeps_the_digest_of_the_session_id_never_the_id(
    service: InProcessService,
) -> None:
    client = browser(service)
    sign_in(client)
    session_id = client.cookies["siesta_console"]
    database = Path(service.data_dir) / "siesta.db"
    with sqlite3.connect(database) as conn:
        kept = conn.execute("SELECT id_digest, body FROM console_sessions").fetchall()
    digests = [row[0] for row in kept]
    assert hashlib.sha256(session_id.encode()).hexdigest() in digests
    assert all(session_id not in body and ADMIN_TOKEN not in body for _, body in kept)


def test_signing_out_ends_the_session_for_every_copy_of_the_cookie(
    service: InProcessService,
) -> None:
    client = browser(service)
    csrf = sign_in(client)
    copy = browser(service)
    copy.cookies.set("siesta_console", client.cookies["siesta_console"], path="/console")
    assert copy.get("/console").url.path == "/console"

    out = client.post("/console/sign-out", data={"csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/console/sign-in"
    assert 'siesta_console=""' in out.headers["set-cookie"]
    assert copy.get("/console", follow_redirects=False).status_code == 303
    assert copy.post("/console/sign-out", data={"csrf": csrf}).status_code == 401


def test_pages_carry_the_security_headers(service: InProcessService) -> None:
    client = browser(service)
    sign_in(client)
    for path in ("/console", "/console/sign-in", "/console/settings"):
        headers = client.get(path, follow_redirects=False).headers
        policy = headers["content-security-policy"]
        # Our own script files only (the build page's live log): nothing inline, nothing
        # from elsewhere.
        assert "script-src 'self';" in policy and "unsafe" not in policy
        assert "default-src 'none'" in policy
        assert headers["x-frame-options"] == "DENY"
        assert headers["referrer-policy"] == "same-origin"
        assert headers["cache-control"] == "no-store"


def test_the_settings_page_masks_every_secret(service: InProcessService) -> None:
    client = browser(service)
    sign_in(client)
    page = client.get("/console/settings")

    assert page.status_code == 200
    assert "••••••" in page.text
    assert "openai_api_key" in page.text and "max_request_bytes" in page.text
    settings = client.app.state.services.settings  # type: ignore[attr-defined]
    secrets = [*SECRETS.values(), TOKEN, ADMIN_TOKEN, TOOLS_TOKEN]
    secrets += [token.sha256 for token in settings.tokens]
    for secret in secrets:
        assert secret not in page.text


def test_every_console_action_is_recorded_in_the_audit_trail(service: InProcessService) -> None:
    started = time.time()
    client = browser(service)
    csrf = sign_in(client)
    sandbox(service, "conv-audit")
    base = f"/console/sandboxes/{ORG}/conv-audit"
    for action in ("suspend", "resume", "delete"):
        done = client.post(f"{base}/{action}", data={"csrf": csrf}, follow_redirects=False)
        assert done.status_code == 303, done.text
    held = [hold(service, f"conv-audit-{n}") for n in range(2)]
    for approval_id, decision in zip(held, ("approve", "deny"), strict=True):
        decided = client.post(
            f"/console/approvals/{ORG}/{approval_id}",
            data={"csrf": csrf, "decision": decision},
            follow_redirects=False,
        )
        assert decided.status_code == 303, decided.text
    client.post("/console/sign-out", data={"csrf": csrf})

    audit = service.client.app.state.services.audit  # type: ignore[attr-defined]
    entries = [e for e in audit.list(AuditFilter(actor=ADMIN)) if e.at >= started][::-1]
    assert [(e.actor, e.action, e.target) for e in entries] == [
        (ADMIN, "console.sign_in", "console"),
        (ADMIN, "sandbox.suspend", f"{ORG}/conv-audit"),
        (ADMIN, "sandbox.resume", f"{ORG}/conv-audit"),
        (ADMIN, "sandbox.delete", f"{ORG}/conv-audit"),
        (ADMIN, "approval.approve", f"{ORG}/{held[0]}"),
        (ADMIN, "approval.deny", f"{ORG}/{held[1]}"),
        (ADMIN, "console.sign_out", "console"),
    ]
    assert {(e.via, e.source) for e in entries} == {("console", "testclient")}
    assert entries[1].details == {"ok": True, "state": "paused", "changed": True}


def hold(service: InProcessService, conversation: str, command: str = "echo held") -> str:
    """A runCommand held for approval (the agent's policy); its approval id."""
    response = service.client.post(
        "/v1/tools/execute",
        headers={"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": ORG},
        json={
            "conversationId": conversation,
            "agent": AGENT,
            "user": {"id": "user-1", "role": "User"},
            "function": "runCommand",
            "arguments": {"command": command},
        },
    )
    assert response.status_code == 200 and response.json()["status"] == "pending_approval"
    approval_id: str = response.json()["error"]["approvalId"]
    return approval_id


def test_an_approvals_arguments_are_shown_whole_and_escaped(service: InProcessService) -> None:
    command = "echo '<script>alert(1)</script>' && " + "x" * 5000
    approval_id = hold(service, "conv-escaped", command)
    client = browser(service)
    sign_in(client)
    page = client.get("/console/approvals").text

    assert f'data-approval-id="{approval_id}"' in page
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "x" * 5000 in page  # complete, not cut as the list API cuts texts


def test_the_console_is_not_in_the_openapi_document(service: InProcessService) -> None:
    paths = service.client.get("/openapi.json").json()["paths"]
    assert paths and not [path for path in paths if path.startswith("/console")]
