"""One org can never reach another's data: every route is called as org B with org A's
conversation, file, execution and approval ids.

Routes that name a resource by id (a sandbox session, a file, an approval) answer 404.
Conversation routes make the conversation on first use, so org B naming org A's
conversation id gets its own, empty conversation: those answer for B, and the test
asserts that nothing of A is in the answer and that A's data is unchanged after all
probes. Routes that hold no org data say why. The table must list every route.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.helpers import APPROVER_TOKEN, TOKEN, tokens_setting
from tests.inprocess import InProcessService, app_routes, in_process_service

MARKER = f"org-a-secret-{uuid.uuid4().hex}"
"""What org A wrote: file content, command arguments. Never in an answer to org B."""
NAME = f"note-{uuid.uuid4().hex[:8]}.txt"
"""The name of A's files; B's probes name it too, so answers may echo it."""
CONVERSATION = "/v1/conversations/{conversation_id}"
AGENT = {
    "id": "agent-a",
    "systemToolIds": ["sandbox", "js_executor"],
    "baseImage": "debian-base",
    "functionPolicies": {"runCommand": "confirm"},
}
A_AGENT = {**AGENT, "contentDefault": MARKER}
"""A's registered agent (``POST /v1/agents``): B's probes never see or change it."""
USER = {"id": "user-1", "role": "User"}


@dataclass
class OrgA:
    conversation: str
    session_id: str
    file_id: str
    execution_id: str
    approval_id: str


def headers(org: str, token: str = TOKEN) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "X-Siesta-Org": org,
        "X-Siesta-User": "user-1",
        "X-Siesta-Base-Image": "debian-base",
    }


A, B = headers("org-a"), headers("org-b")
B_APPROVER = headers("org-b", APPROVER_TOKEN)
TENANT_B_TOKEN = "tenant-b-token-" + uuid.uuid4().hex
"""A token bound to org-b (and every scope): a tenant's own, as the manual configures one
(docs/concepts/tenancy.md)."""
USER_B_TOKEN = "user-b-token-" + uuid.uuid4().hex
"""A token bound to org-b and to the user ``user-b``."""
ALL_SCOPES = ["sandbox", "shell", "tools", "approve", "admin"]
BOUND_B = {k: v for k, v in headers("org-b", TENANT_B_TOKEN).items() if k != "X-Siesta-Org"}
"""tenant-b's bound token naming no org: it acts in its own, org-b."""
BOUND_B_NAMING_A = headers("org-a", TENANT_B_TOKEN)
"""tenant-b's bound token naming org-a: refused on every route that acts in an org."""
USER_B_NAMING_USER_1 = {**BOUND_B, "Authorization": f"Bearer {USER_B_TOKEN}"}
"""The user-bound token naming ``user-1``: refused wherever a call acts for a user."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_EGRESS__SECRETS_KEY": "tenancy-" + uuid.uuid4().hex,
        "SIESTA_TOKENS": tokens_setting(
            ("approver", APPROVER_TOKEN, ["approve"]),
            ("tenant-b", TENANT_B_TOKEN, ALL_SCOPES, "org-b"),
            ("user-b", USER_B_TOKEN, ALL_SCOPES, {"org": "org-b", "user": "user-b"}),
        ),
    }
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def execute(client: Any, conversation: str, function: str, arguments: dict[str, Any]) -> Any:
    body = {"conversationId": conversation, "agent": AGENT, "user": USER}
    response = client.post(
        "/v1/tools/execute", headers=A, json={**body, "function": function, "arguments": arguments}
    )
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def org_a(service: InProcessService) -> OrgA:
    client, conversation = service.client, f"conv-{uuid.uuid4().hex[:8]}"
    base = f"/v1/conversations/{conversation}"
    written = client.post(
        f"{base}/sandbox/writeFile", headers=A, json={"path": NAME, "content": MARKER}
    )
    assert written.status_code == 200, written.text
    uploaded = client.post(
        f"{base}/files", headers=A, files={"file": (NAME, MARKER.encode(), "text/plain")}
    )
    assert uploaded.status_code == 201, uploaded.text
    denied = client.put(f"{base}/sandbox/network", headers=A, json=A_NETWORK)
    assert denied.status_code == 200, denied.text
    registered = client.post("/v1/agents", headers=A, json=A_AGENT)
    assert registered.status_code == 200, registered.text
    session = client.get(f"{base}/sandbox", headers=A).json()["sessionId"]
    ran = execute(client, conversation, "readFile", {"path": NAME})
    waiting = execute(client, conversation, "runCommand", {"command": f"echo {MARKER}"})
    assert ran["ok"] is True and waiting["status"] == "pending_approval"
    return OrgA(
        conversation, session, uploaded.json()["id"], ran["executionId"], waiting["executionId"]
    )


A_NETWORK = {"allow": None, "deny": [f"{MARKER}.example"], "internet": False}
"""A's own network rules (B's probes of the network route must not see them)."""
Probe = Callable[[httpx.Client, OrgA], httpx.Response]
NOT_FOUND, OWN_EMPTY, NO_ORG_DATA = "404", "B's own empty conversation", "holds no org data"
OWN_NO_PROCESSES = "B's own conversation, where the fake provider runs no process (503)"
"""Starting a process: in B's own conversation, which the in-process service's fake
provider cannot run processes in (tests/api/test_processes_docker.py runs them)."""


def conv(a: OrgA, tail: str = "") -> str:
    return f"/v1/conversations/{a.conversation}{tail}"


NO_BEARER = "a port's path or a signed file URL takes its own credential alone (401)"
CONSOLE = "the operators' console (every org's, for admin sign-ins): no bearer token opens it"
"""A page sends a bearer-token caller to the sign-in form (303), a change is refused (401);
the console's own tests (tests/console) cover who signs in and what it shows."""


def console_probe(method: str, path: str) -> Probe:
    """B's bearer token (with every scope) on a console route naming A's ids."""
    return lambda c, a: c.request(
        method,
        path.format(
            org="org-a",
            conversation=a.conversation,
            execution=a.execution_id,
            approval=a.approval_id,
        ),
        headers=B,
        data={"csrf": "x", "decision": "approve"} if method == "POST" else None,
        follow_redirects=False,
    )


CONSOLE_ROUTES = {
    ("GET", "/console"): "/console",
    ("POST", "/console/sign-in"): "/console/sign-in",
    ("POST", "/console/sign-out"): "/console/sign-out",
    ("GET", "/console/sandboxes"): "/console/sandboxes?org=org-a",
    (
        "GET",
        "/console/sandboxes/{org}/{conversation_id}",
    ): "/console/sandboxes/{org}/{conversation}",
    ("GET", "/console/sandboxes/{org}/{conversation_id}/{action}"): (
        "/console/sandboxes/{org}/{conversation}/delete"
    ),
    ("POST", "/console/sandboxes/{org}/{conversation_id}/{action}"): (
        "/console/sandboxes/{org}/{conversation}/delete"
    ),
    ("GET", "/console/approvals"): "/console/approvals",
    ("POST", "/console/approvals/{org}/{approval_id}"): "/console/approvals/{org}/{approval}",
    ("GET", "/console/executions"): "/console/executions?org=org-a",
    ("GET", "/console/executions/{org}/{execution_id}"): "/console/executions/{org}/{execution}",
    ("GET", "/console/settings"): "/console/settings",
    ("GET", "/console/images"): "/console/images",
    ("POST", "/console/images"): "/console/images",
    ("GET", "/console/images/{ref}"): "/console/images/debian-base:1",
    ("GET", "/console/images/{ref}/retire"): "/console/images/debian-base:1/retire",
    ("POST", "/console/images/{ref}/{action}"): "/console/images/debian-base:1/retire",
    ("GET", "/console/image-builds/{build_id}"): "/console/image-builds/" + "0" * 32,
    ("GET", "/console/image-builds/{build_id}/events"): (
        "/console/image-builds/" + "0" * 32 + "/events"
    ),
    ("GET", "/console/audit"): "/console/audit",
    ("GET", "/console/knowledge"): "/console/knowledge?org=org-a",
    ("POST", "/console/knowledge/{org}"): "/console/knowledge/org-a",
    ("GET", "/console/knowledge/{org}/{base_id}"): "/console/knowledge/org-a/kb0",
    ("POST", "/console/knowledge/{org}/{base_id}/documents"): (
        "/console/knowledge/org-a/kb0/documents"
    ),
    ("POST", "/console/knowledge/{org}/{base_id}/documents/{version_id}/remove"): (
        "/console/knowledge/org-a/kb0/documents/cv0/remove"
    ),
    ("POST", "/console/knowledge/{org}/{base_id}/delete"): "/console/knowledge/org-a/kb0/delete",
}


def port_probe(method: str) -> Probe:
    """A request to a port of A's conversation id with B's bearer token."""
    return lambda c, a: c.request(method, conv(a, "/ports/8000/x"), headers=B)


FS_CALLS = ("stat", "list", "mkdir", "move", "remove", "metadata")
A_SNAPSHOTS: dict[str, str] = {}


def a_snapshot(client: httpx.Client, a: OrgA) -> str:
    """A snapshot of A's sandbox (taken by A once), for B's probes to name."""
    if a.conversation not in A_SNAPSHOTS:
        taken = client.post(conv(a, "/snapshots"), headers=A, json={})
        assert taken.status_code == 201, taken.text
        A_SNAPSHOTS[a.conversation] = taken.json()["snapshotId"]
    snapshot_id = A_SNAPSHOTS[a.conversation]
    assert client.get(f"/v1/snapshots/{snapshot_id}", headers=A).status_code == 200
    return snapshot_id


def a_bank(client: httpx.Client) -> str:
    """A memory bank of A's (made once) holding an entry, for B's probes to name."""
    if not A_BANKS:
        body = {"name": MARKER, "type": "general"}
        made = client.post("/v1/memory-banks", headers=A, json=body)
        assert made.status_code == 201, made.text
        A_BANKS.append(made.json()["memoryBankId"])
        entry = {"key": "k", "content": MARKER}
        added = client.post(f"/v1/memory-banks/{A_BANKS[0]}/entries", headers=A, json=entry)
        assert added.status_code == 201, added.text
    return A_BANKS[0]


A_BANKS: list[str] = []
A_BASES: list[tuple[str, str]] = []


def a_base(client: httpx.Client) -> tuple[str, str]:
    """A knowledge base of A's (made once) holding a document whose text is the marker:
    (base id, content version id), for B's probes to name."""
    if not A_BASES:
        made = client.post("/v1/knowledge-bases", headers=A, json={"name": MARKER})
        assert made.status_code == 201, made.text
        base = made.json()["knowledgeBaseId"]
        body = {"name": "a.md", "text": f"# {MARKER}\n\n{MARKER}"}
        added = client.post(f"/v1/knowledge-bases/{base}/documents", headers=A, json=body)
        assert added.status_code == 202, added.text
        A_BASES.append((base, added.json()["contentVersionId"]))
    return A_BASES[0]


def with_a_base(client: httpx.Client, probe: Callable[[], httpx.Response]) -> httpx.Response:
    a_base(client)
    return probe()


A_SECRET = "a-token"
SECRET_BODY = {"value": MARKER, "hosts": ["api.example.com"]}


def a_secret(client: httpx.Client, name: str = A_SECRET) -> str:
    """A secret of A's (its value is the marker), for B's probes to name."""
    made = client.put(f"/v1/secrets/{name}", headers=A, json=SECRET_BODY)
    assert made.status_code == 200, made.text
    return name


def with_a_bank(client: httpx.Client, probe: Callable[[], httpx.Response]) -> httpx.Response:
    a_bank(client)
    return probe()


def with_own_sandbox(
    client: httpx.Client, a: OrgA, probe: Callable[[], httpx.Response]
) -> httpx.Response:
    """B's own conversation of A's id, with a sandbox of its own, then ``probe``."""
    made = client.post(conv(a, "/sandbox/writeFile"), headers=B, json={"path": "b", "content": "b"})
    if made.status_code != 200:  # refused already (a bound token naming org-a): that answer
        return made
    return probe()


def fs_probe(call: str) -> Probe:
    """A file system call on A's file's name, in B's own conversation."""
    body: dict[str, object] = {"path": NAME}
    if call == "move":
        body = {"source": NAME, "destination": "x"}
    elif call == "metadata":
        body = {"path": NAME, "metadata": {"k": "v"}}
    return lambda c, a: c.post(conv(a, f"/sandbox/fs/{call}"), headers=B, json=body)


PROBES: dict[tuple[str, str], tuple[str, Probe]] = {
    ("GET", f"{CONVERSATION}/sandbox"): (
        NOT_FOUND,
        lambda c, a: c.get(conv(a, "/sandbox"), headers=B),
    ),
    ("GET", f"{CONVERSATION}/files/{{file_id}}/content"): (
        NOT_FOUND,
        lambda c, a: c.get(conv(a, f"/files/{a.file_id}/content"), headers=B),
    ),
    ("GET", "/v1/tools/approvals"): (
        OWN_EMPTY,
        lambda c, a: c.get(
            "/v1/tools/approvals", headers=B_APPROVER, params={"conversationId": a.conversation}
        ),
    ),
    ("GET", "/v1/tools/approvals/{approval_id}"): (
        NOT_FOUND,
        lambda c, a: c.get(f"/v1/tools/approvals/{a.approval_id}", headers=B_APPROVER),
    ),
    ("POST", "/v1/tools/approvals/{approval_id}"): (
        NOT_FOUND,
        lambda c, a: c.post(
            f"/v1/tools/approvals/{a.approval_id}",
            headers=B_APPROVER,
            json={"decision": "approve", "by": "mallory"},
        ),
    ),
    ("POST", f"{CONVERSATION}/sandbox/readFile"): (
        NOT_FOUND,
        lambda c, a: c.post(conv(a, "/sandbox/readFile"), headers=B, json={"path": NAME}),
    ),
    ("GET", f"{CONVERSATION}/files"): (OWN_EMPTY, lambda c, a: c.get(conv(a, "/files"), headers=B)),
    ("POST", f"{CONVERSATION}/files"): (
        OWN_EMPTY,
        lambda c, a: c.post(
            conv(a, "/files"), headers=B, files={"file": ("b.txt", b"b", "text/plain")}
        ),
    ),
    ("DELETE", CONVERSATION): (OWN_EMPTY, lambda c, a: c.delete(conv(a), headers=B)),
    ("POST", f"{CONVERSATION}/sandbox/listFiles"): (
        OWN_EMPTY,
        lambda c, a: c.post(conv(a, "/sandbox/listFiles"), headers=B, json={}),
    ),
    ("POST", f"{CONVERSATION}/sandbox/runCommand"): (
        OWN_EMPTY,
        lambda c, a: c.post(
            conv(a, "/sandbox/runCommand"), headers=B, json={"command": "cat *.txt; ls -la"}
        ),
    ),
    ("POST", f"{CONVERSATION}/sandbox/writeFile"): (
        OWN_EMPTY,
        lambda c, a: c.post(
            conv(a, "/sandbox/writeFile"), headers=B, json={"path": NAME, "content": "b"}
        ),
    ),
    ("POST", f"{CONVERSATION}/sandbox/publishFiles"): (
        OWN_EMPTY,
        lambda c, a: c.post(conv(a, "/sandbox/publishFiles"), headers=B, json={"paths": ["x.txt"]}),
    ),
    ("POST", f"{CONVERSATION}/js"): (
        OWN_EMPTY,
        lambda c, a: c.post(
            conv(a, "/js"), headers=B, json={"code": f'editArtifactFile("{a.file_id}", "b")'}
        ),
    ),
    ("POST", "/v1/tools/execute"): (
        OWN_EMPTY,
        lambda c, a: c.post(
            "/v1/tools/execute",
            headers=B,
            json={
                "conversationId": a.conversation,
                "agent": AGENT,
                "user": USER,
                "function": "readFile",
                "arguments": {"path": NAME},
            },
        ),
    ),
    ("GET", f"{CONVERSATION}/sandbox/metrics"): (
        NOT_FOUND,
        lambda c, a: c.get(conv(a, "/sandbox/metrics"), headers=B),
    ),
    ("POST", f"{CONVERSATION}/sandbox/pause"): (
        OWN_EMPTY,  # B's own sandbox of that id is stopped; A's runs on (checked after)
        lambda c, a: with_own_sandbox(
            c, a, lambda: c.post(conv(a, "/sandbox/pause"), headers=B, json={"keepMemory": False})
        ),
    ),
    ("POST", f"{CONVERSATION}/sandbox/resume"): (
        OWN_EMPTY,
        lambda c, a: with_own_sandbox(c, a, lambda: c.post(conv(a, "/sandbox/resume"), headers=B)),
    ),
    ("GET", f"{CONVERSATION}/sandbox/network"): (
        OWN_EMPTY,
        lambda c, a: c.get(conv(a, "/sandbox/network"), headers=B),
    ),
    ("PUT", f"{CONVERSATION}/sandbox/network"): (
        OWN_EMPTY,
        lambda c, a: c.put(conv(a, "/sandbox/network"), headers=B, json={"internet": True}),
    ),
    ("GET", f"{CONVERSATION}/sandbox/processes"): (
        OWN_EMPTY,
        lambda c, a: c.get(conv(a, "/sandbox/processes"), headers=B),
    ),
    ("POST", f"{CONVERSATION}/sandbox/processes"): (
        OWN_NO_PROCESSES,
        lambda c, a: c.post(conv(a, "/sandbox/processes"), headers=B, json={"command": "ls"}),
    ),
    ("GET", f"{CONVERSATION}/sandbox/processes/{{pid}}"): (
        NOT_FOUND,
        lambda c, a: c.get(conv(a, "/sandbox/processes/1"), headers=B),
    ),
    ("POST", f"{CONVERSATION}/sandbox/processes/{{pid}}/input"): (
        NOT_FOUND,
        lambda c, a: c.post(conv(a, "/sandbox/processes/1/input"), headers=B, json={"data": "x"}),
    ),
    ("POST", f"{CONVERSATION}/sandbox/processes/{{pid}}/signal"): (
        NOT_FOUND,
        lambda c, a: c.post(conv(a, "/sandbox/processes/1/signal"), headers=B, json={}),
    ),
    **{
        ("POST", f"{CONVERSATION}/sandbox/fs/{call}"): (OWN_NO_PROCESSES, fs_probe(call))
        for call in FS_CALLS
    },
    ("GET", f"{CONVERSATION}/sandbox/ports/{{port}}"): (
        NOT_FOUND,  # B has no sandbox there: no token for A's
        lambda c, a: c.get(conv(a, "/sandbox/ports/8000"), headers=B),
    ),
    **{
        (method, f"{CONVERSATION}/ports/{{port}}/{{path:path}}"): (
            NO_BEARER,  # a port token names its org and conversation: test_ports_docker.py
            port_probe(method),
        )
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
    },
    ("POST", f"{CONVERSATION}/sandbox/fs/watchers"): (
        OWN_NO_PROCESSES,
        lambda c, a: c.post(conv(a, "/sandbox/fs/watchers"), headers=B, json={"path": NAME}),
    ),
    ("GET", f"{CONVERSATION}/sandbox/fs/watchers/{{watcher_id}}"): (
        NOT_FOUND,  # a watcher is its conversation's (tests/api/test_filesystem_docker.py)
        lambda c, a: c.get(conv(a, "/sandbox/fs/watchers/w"), headers=B),
    ),
    ("DELETE", f"{CONVERSATION}/sandbox/fs/watchers/{{watcher_id}}"): (
        NOT_FOUND,
        lambda c, a: c.delete(conv(a, "/sandbox/fs/watchers/w"), headers=B),
    ),
    ("POST", f"{CONVERSATION}/snapshots"): (
        OWN_EMPTY,  # of B's own sandbox of that id (made first), never A's
        lambda c, a: with_own_sandbox(
            c, a, lambda: c.post(conv(a, "/snapshots"), headers=B, json={})
        ),
    ),
    ("POST", f"{CONVERSATION}/fork"): (
        OWN_EMPTY,
        lambda c, a: with_own_sandbox(
            c,
            a,
            lambda: c.post(
                conv(a, "/fork"), headers=B, json={"conversationId": f"fork-{uuid.uuid4().hex[:8]}"}
            ),
        ),
    ),
    ("POST", f"{CONVERSATION}/forks"): (
        OWN_EMPTY,
        lambda c, a: with_own_sandbox(
            c,
            a,
            lambda: c.post(
                conv(a, "/forks"),
                headers=B,
                json={"conversationIds": [f"fork-{uuid.uuid4().hex[:8]}"]},
            ),
        ),
    ),
    # A signed file URL names no org: only a signature made with a sandbox's access
    # token opens it (tests/e2b/test_signed_urls_docker.py); a forged one is refused.
    ("GET", "/files"): (
        NO_BEARER,
        lambda c, a: c.get("/files", headers=B, params={"path": NAME, "signature": "v1_x"}),
    ),
    ("POST", "/files"): (
        NO_BEARER,
        lambda c, a: c.post("/files", headers=B, params={"path": NAME, "signature": "v1_x"}),
    ),
    ("GET", "/v1/snapshots"): (
        OWN_EMPTY,
        lambda c, a: c.get("/v1/snapshots", headers=B, params={"conversationId": a.conversation}),
    ),
    ("GET", "/v1/snapshots/{snapshot_id}"): (
        NOT_FOUND,
        lambda c, a: c.get(f"/v1/snapshots/{a_snapshot(c, a)}", headers=B),
    ),
    ("DELETE", "/v1/snapshots/{snapshot_id}"): (
        NOT_FOUND,
        lambda c, a: c.delete(f"/v1/snapshots/{a_snapshot(c, a)}", headers=B),
    ),
    ("POST", "/v1/snapshots/{snapshot_id}/conversations"): (
        NOT_FOUND,
        lambda c, a: c.post(
            f"/v1/snapshots/{a_snapshot(c, a)}/conversations",
            headers=B,
            json={"conversationId": f"start-{uuid.uuid4().hex[:8]}"},
        ),
    ),
    ("POST", "/v1/memory-banks"): (
        OWN_EMPTY,  # B's own bank, after A made one
        lambda c, a: with_a_bank(
            c, lambda: c.post("/v1/memory-banks", headers=B, json={"name": "b", "type": "general"})
        ),
    ),
    ("GET", "/v1/memory-banks"): (
        OWN_EMPTY,  # B's banks only (its own, if a probe made one)
        lambda c, a: with_a_bank(c, lambda: c.get("/v1/memory-banks", headers=B)),
    ),
    ("GET", "/v1/memory-banks/{bank_id}"): (
        NOT_FOUND,
        lambda c, a: c.get(f"/v1/memory-banks/{a_bank(c)}", headers=B),
    ),
    ("DELETE", "/v1/memory-banks/{bank_id}"): (
        NOT_FOUND,
        lambda c, a: c.delete(f"/v1/memory-banks/{a_bank(c)}", headers=B),
    ),
    ("POST", "/v1/memory-banks/{bank_id}/entries"): (
        NOT_FOUND,
        lambda c, a: c.post(
            f"/v1/memory-banks/{a_bank(c)}/entries", headers=B, json={"key": "k", "content": "x"}
        ),
    ),
    ("POST", "/v1/knowledge-bases"): (
        OWN_EMPTY,  # B's own base, after A made one
        lambda c, a: with_a_base(
            c, lambda: c.post("/v1/knowledge-bases", headers=B, json={"name": "b"})
        ),
    ),
    ("GET", "/v1/knowledge-bases"): (
        OWN_EMPTY,  # B's bases only
        lambda c, a: with_a_base(c, lambda: c.get("/v1/knowledge-bases", headers=B)),
    ),
    ("GET", "/v1/knowledge-bases/{base_id}"): (
        NOT_FOUND,
        lambda c, a: c.get(f"/v1/knowledge-bases/{a_base(c)[0]}", headers=B),
    ),
    ("DELETE", "/v1/knowledge-bases/{base_id}"): (
        NOT_FOUND,
        lambda c, a: c.delete(f"/v1/knowledge-bases/{a_base(c)[0]}", headers=B),
    ),
    ("POST", "/v1/knowledge-bases/{base_id}/documents"): (
        NOT_FOUND,
        lambda c, a: c.post(
            f"/v1/knowledge-bases/{a_base(c)[0]}/documents",
            headers=B,
            json={"name": "b.md", "text": "b"},
        ),
    ),
    ("GET", "/v1/knowledge-bases/{base_id}/documents"): (
        NOT_FOUND,
        lambda c, a: c.get(f"/v1/knowledge-bases/{a_base(c)[0]}/documents", headers=B),
    ),
    ("GET", "/v1/knowledge-bases/{base_id}/documents/{version_id}"): (
        NOT_FOUND,
        lambda c, a: c.get("/v1/knowledge-bases/{}/documents/{}".format(*a_base(c)), headers=B),
    ),
    ("DELETE", "/v1/knowledge-bases/{base_id}/documents/{version_id}"): (
        NOT_FOUND,
        lambda c, a: c.delete("/v1/knowledge-bases/{}/documents/{}".format(*a_base(c)), headers=B),
    ),
    ("POST", "/v1/knowledge-bases/{base_id}/search"): (
        NOT_FOUND,
        lambda c, a: c.post(
            f"/v1/knowledge-bases/{a_base(c)[0]}/search", headers=B, json={"query": MARKER}
        ),
    ),
    ("GET", "/v1/secrets"): (
        OWN_EMPTY,  # B's secrets only: A's name is not listed
        lambda c, a: (a_secret(c), c.get("/v1/secrets", headers=B))[1],
    ),
    ("PUT", "/v1/secrets/{name}"): (
        OWN_EMPTY,  # B's own secret of that name; A's keeps its value (checked after)
        lambda c, a: c.put(
            f"/v1/secrets/{a_secret(c, 'a-token-2')}",
            headers=B,
            json={"value": "b-value", "hosts": ["api.example.com"]},
        ),
    ),
    ("GET", "/v1/secrets/{name}"): (
        NOT_FOUND,
        lambda c, a: c.get(f"/v1/secrets/{a_secret(c)}", headers=B),
    ),
    ("DELETE", "/v1/secrets/{name}"): (
        NOT_FOUND,
        lambda c, a: c.delete(f"/v1/secrets/{a_secret(c)}", headers=B),
    ),
    ("GET", "/v1/tools/executions"): (
        OWN_EMPTY,
        lambda c, a: c.get(
            "/v1/tools/executions", headers=B, params={"conversationId": a.conversation}
        ),
    ),
    ("POST", "/v1/tools/catalog"): (
        OWN_EMPTY,  # B's org's policies over the request's agent (A's registration unseen)
        lambda c, a: c.post(
            "/v1/tools/catalog",
            headers=B,
            json={"agent": AGENT, "user": USER, "org": B.get("X-Siesta-Org", "org-b")},
        ),
    ),
    ("GET", "/v1/agents"): (OWN_EMPTY, lambda c, a: c.get("/v1/agents", headers=B)),
    ("GET", "/v1/agents/{agent_id}"): (
        NOT_FOUND,
        lambda c, a: c.get("/v1/agents/agent-a", headers=B),
    ),
    ("DELETE", "/v1/agents/{agent_id}"): (
        NOT_FOUND,
        # Twice: B's own agent of that id (a probe registers one) goes first.
        lambda c, a: [c.delete("/v1/agents/agent-a", headers=B) for _ in range(2)][-1],
    ),
    ("POST", "/v1/agents"): (
        OWN_EMPTY,  # B's own agent of that id: A's registration is untouched
        lambda c, a: c.post("/v1/agents", headers=B, json=AGENT),
    ),
    ("GET", "/v1/images"): (NO_ORG_DATA, lambda c, a: c.get("/v1/images", headers=B)),
    ("GET", "/v1/tools/system"): (NO_ORG_DATA, lambda c, a: c.get("/v1/tools/system", headers=B)),
    ("POST", "/v1/images/validate"): (
        NO_ORG_DATA,
        lambda c, a: c.post("/v1/images/validate", headers=B, json={"baseImage": "debian-base"}),
    ),
    ("POST", "/v1/admin/reconcile"): (
        NO_ORG_DATA,  # deployment-wide, for operators (ids of sessions, never content)
        lambda c, a: c.post("/v1/admin/reconcile", headers=B, params={"dryRun": "true"}),
    ),
    # The operators' catalog and audit trail: deployment-wide, for an admin token
    # (conversation ids and actions, never content, session ids or names).
    ("GET", "/v1/admin/audit"): (NO_ORG_DATA, lambda c, a: c.get("/v1/admin/audit", headers=B)),
    ("GET", "/v1/admin/images"): (NO_ORG_DATA, lambda c, a: c.get("/v1/admin/images", headers=B)),
    ("POST", "/v1/admin/images"): (
        NO_ORG_DATA,
        lambda c, a: c.post(
            "/v1/admin/images", headers=B, json={"id": "tenancy", "title": "T", "build": False}
        ),
    ),
    ("POST", "/v1/admin/image-imports"): (
        NO_ORG_DATA,
        lambda c, a: c.post("/v1/admin/image-imports", headers=B),
    ),
    ("GET", "/v1/admin/images/{ref}"): (
        NO_ORG_DATA,
        lambda c, a: c.get("/v1/admin/images/debian-base", headers=B),
    ),
    ("POST", "/v1/admin/images/{ref}/state"): (
        NO_ORG_DATA,
        lambda c, a: c.post(
            "/v1/admin/images/debian-base/state", headers=B, json={"state": "enabled"}
        ),
    ),
    ("POST", "/v1/admin/images/{ref}/default"): (
        NO_ORG_DATA,
        lambda c, a: c.post("/v1/admin/images/debian-base/default", headers=B),
    ),
    ("POST", "/v1/admin/images/{ref}/builds"): (
        NO_ORG_DATA,  # the fake provider builds nothing: the build fails, on record
        lambda c, a: c.post("/v1/admin/images/debian-base/builds", headers=B),
    ),
    ("GET", "/v1/admin/image-builds/{build_id}"): (
        NOT_FOUND,
        lambda c, a: c.get("/v1/admin/image-builds/" + "0" * 32, headers=B),
    ),
    ("GET", "/v1/admin/image-builds/{build_id}/events"): (
        NOT_FOUND,
        lambda c, a: c.get("/v1/admin/image-builds/" + "0" * 32 + "/events", headers=B),
    ),
    ("GET", "/healthz"): (NO_ORG_DATA, lambda c, a: c.get("/healthz")),
    ("GET", "/readyz"): (NO_ORG_DATA, lambda c, a: c.get("/readyz")),
    ("GET", "/metrics"): (NO_ORG_DATA, lambda c, a: c.get("/metrics")),
    ("GET", "/openapi.json"): (NO_ORG_DATA, lambda c, a: c.get("/openapi.json")),
    ("GET", "/docs"): (NO_ORG_DATA, lambda c, a: c.get("/docs")),
    ("GET", "/docs/oauth2-redirect"): (NO_ORG_DATA, lambda c, a: c.get("/docs/oauth2-redirect")),
    ("GET", "/redoc"): (NO_ORG_DATA, lambda c, a: c.get("/redoc")),
    ("GET", "/console/sign-in"): (NO_ORG_DATA, lambda c, a: c.get("/console/sign-in")),
    ("GET", "/console/static/console.css"): (
        NO_ORG_DATA,
        lambda c, a: c.get("/console/static/console.css"),
    ),
    ("GET", "/console/static/build-log.js"): (
        NO_ORG_DATA,
        lambda c, a: c.get("/console/static/build-log.js"),
    ),
    **{route: (CONSOLE, console_probe(route[0], path)) for route, path in CONSOLE_ROUTES.items()},
}


def test_every_route_has_a_cross_org_probe(service: InProcessService) -> None:
    assert app_routes(service.client.app) == set(PROBES)  # type: ignore[arg-type]


WAYS = {
    "header": (B, B_APPROVER),
    "bound": (BOUND_B, BOUND_B),
    "bound-naming-a": (BOUND_B_NAMING_A, BOUND_B_NAMING_A),
    "user-bound-naming-another": (USER_B_NAMING_USER_1, USER_B_NAMING_USER_1),
}
"""How org B comes: an unbound backend token naming org-b (``header``); tenant-b's token
bound to org-b naming no org; the same naming org-a; a token bound to org-b and user-b
naming another user."""
OPERATOR_ROUTES = "/v1/admin/"
"""Deployment-wide routes: a token bound to an org is refused there (403)."""
ACTS_FOR_A_USER = (
    "/v1/conversations/",
    "/v1/tools/execute",
    "/v1/tools/catalog",
    "/v1/snapshots/{snapshot_id}/conversations",
)
"""Routes whose call acts for a user (``X-Siesta-User``, the body's user)."""


@pytest.mark.parametrize("route", sorted(PROBES), ids=lambda r: f"{r[0]} {r[1]}")
@pytest.mark.parametrize("way", sorted(WAYS))
def test_org_b_never_sees_org_a(
    service: InProcessService,
    org_a: OrgA,
    route: tuple[str, str],
    way: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected, probe = PROBES[route]
    b, b_approver = WAYS[way]
    monkeypatch.setitem(globals(), "B", b)  # the probes read the module's B at call time
    monkeypatch.setitem(globals(), "B_APPROVER", b_approver)
    response = probe(service.client, org_a)  # type: ignore[arg-type]
    for secret in (MARKER, org_a.session_id):
        assert secret not in response.text
    refusal = refused_as(way, route, expected)
    if refusal is not None:
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == refusal
    else:
        assert_answered_as_b(service, response, route, expected, org_a)
    assert_org_a_unchanged(service, org_a)


def refused_as(way: str, route: tuple[str, str], expected: str) -> str | None:
    """The refusal a bound token gets on ``route`` (``None``: it is answered as B)."""
    if way == "header" or expected in (CONSOLE, NO_BEARER):
        return None
    path = route[1]
    if path.startswith(OPERATOR_ROUTES):
        return "org_not_allowed"
    if way == "bound-naming-a" and expected != NO_ORG_DATA:
        return "org_not_allowed"
    if way == "user-bound-naming-another" and path.startswith(ACTS_FOR_A_USER):
        return "user_not_allowed"
    return None


def a_ids(service: InProcessService, a: OrgA) -> set[str]:
    """The ids of everything of A's a list could show: executions, files, agents."""
    client = service.client
    log = client.get(
        "/v1/tools/executions", headers=A, params={"conversationId": a.conversation, "limit": 1000}
    )
    files = client.get(conv(a, "/files"), headers=A).json()["files"]
    return (
        {e["id"] for e in log.json()["executions"]}
        | {f["id"] for f in files}
        | {a.execution_id, a.approval_id, a.file_id}
    )


def assert_answered_as_b(
    service: InProcessService,
    response: httpx.Response,
    route: tuple[str, str],
    expected: str,
    org_a: OrgA,
) -> None:
    if expected == NOT_FOUND:
        assert response.status_code == 404, response.text
    elif expected == NO_BEARER:
        assert response.status_code == 401, response.text
    elif expected == CONSOLE:
        assert response.status_code == (303 if route[0] == "GET" else 401), response.text
    elif expected == OWN_NO_PROCESSES:
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "sandbox_unavailable"
    elif expected == OWN_EMPTY:
        assert response.status_code in (200, 201), response.text
        # Ids B itself sent may be echoed in a message; A's others never appear.
        assert org_a.execution_id not in response.text
        body = response.json()
        lists = ("files", "executions", "approvals", "agents")
        listed: Any = next((body[key] for key in lists if key in body), [])
        assert isinstance(listed, list)
        # B's own (earlier probes act in B's conversation of the same id), never A's.
        assert not {item.get("id") for item in listed} & a_ids(service, org_a)
        assert A_SECRET not in {secret["name"] for secret in body.get("secrets", [])}
    elif expected == NO_ORG_DATA:
        assert response.status_code < 400, response.text


def assert_org_a_unchanged(service: InProcessService, a: OrgA) -> None:
    client = service.client
    assert client.get(conv(a, "/sandbox"), headers=A).json()["sessionId"] == a.session_id
    files = client.get(conv(a, "/files"), headers=A).json()["files"]
    assert [f["id"] for f in files] == [a.file_id]
    assert client.get(conv(a, f"/files/{a.file_id}/content"), headers=A).text == MARKER
    for secret in client.get("/v1/secrets", headers=A).json()["secrets"]:
        assert secret["size"] == len(MARKER)  # B's writes of the same names are B's own
    agent = client.get("/v1/agents/agent-a", headers=A).json()["agent"]
    assert (agent["contentDefault"], agent["functionPolicies"]) == (
        MARKER,
        AGENT["functionPolicies"],
    )
    network = client.get(conv(a, "/sandbox/network"), headers=A).json()
    assert {k: network[k] for k in A_NETWORK} == A_NETWORK
    for bank_id in A_BANKS:
        assert client.get(f"/v1/memory-banks/{bank_id}", headers=A).json()["name"] == MARKER
    read = client.post(conv(a, "/sandbox/readFile"), headers=A, json={"path": NAME})
    assert read.json()["content"] == MARKER
    # Every check reads a file (a logged call): past a hundred probes, the first page of
    # the log no longer reaches back to A's own execution.
    log = client.get(
        "/v1/tools/executions",
        headers=A,
        params={"conversationId": a.conversation, "limit": 1000},
    )
    statuses = {e["id"]: e["status"] for e in log.json()["executions"]}
    assert statuses[a.execution_id] == "succeeded"
    assert statuses[a.approval_id] == "pending_approval"
    # The rest are A's own direct sandbox calls (this check's readFile among them).
    others = [e for e in log.json()["executions"] if e["id"] not in (a.execution_id, a.approval_id)]
    assert {(e["function"], e["userId"]) for e in others} <= {
        ("readFile", A["X-Siesta-User"]),
        ("writeFile", A["X-Siesta-User"]),
        ("setNetworkRules", A["X-Siesta-User"]),  # the fixture's own rules
        ("createSnapshot", A["X-Siesta-User"]),  # A's snapshot, which probes name
    }
