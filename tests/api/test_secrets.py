"""``/v1/secrets`` and offering secrets to a conversation, on the fake provider: what an
operator sets is never shown back, limits name their setting, and a conversation can be
offered only its org's secrets, as placeholders. (The proxy's side: tests/runtime/egress;
end to end on Docker: tests/security/test_egress_secrets_docker.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.helpers import headers, new_conversation, tokens_setting
from tests.inprocess import InProcessService, in_process_service

VALUE = "value-" + uuid.uuid4().hex
SANDBOX_ONLY = "sandbox-only-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_EGRESS__SECRETS_KEY": "api-test-key-" + uuid.uuid4().hex,
        "SIESTA_EGRESS__MAX_SECRETS_PER_ORG": "3",
        "SIESTA_EGRESS__MAX_SECRET_BYTES": "64",
        "SIESTA_TOKENS": tokens_setting(("sandbox-only", SANDBOX_ONLY, ["sandbox"])),
    }
    with in_process_service(tmp_path_factory.mktemp("data"), env) as running:
        yield running


def put(service: InProcessService, name: str, org: str = "org-a", **body: object) -> object:
    body = {"value": VALUE, "hosts": ["api.example.com"], **body}
    return service.client.put(f"/v1/secrets/{name}", headers=headers(org), json=body)


def test_a_secret_is_set_listed_replaced_and_deleted_never_shown(
    service: InProcessService,
) -> None:
    client = service.client
    made = put(service, "github", header="X-Api-Key")
    assert made.status_code == 200, made.text  # type: ignore[attr-defined]
    shown = made.json()  # type: ignore[attr-defined]
    assert shown["name"] == "github" and shown["size"] == len(VALUE)
    assert (shown["hosts"], shown["header"]) == (["api.example.com"], "X-Api-Key")
    listed = client.get("/v1/secrets", headers=headers())
    assert [s["name"] for s in listed.json()["secrets"]] == ["github"]
    assert VALUE not in listed.text + client.get("/v1/secrets/github", headers=headers()).text
    again = put(service, "github", value="shorter")
    assert again.json()["size"] == len("shorter")  # type: ignore[attr-defined]
    assert again.json()["createdAt"] == shown["createdAt"]  # type: ignore[attr-defined]
    assert client.delete("/v1/secrets/github", headers=headers()).status_code == 204
    gone = client.get("/v1/secrets/github", headers=headers())
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "secret_not_found")
    audit = client.get("/v1/admin/audit", headers={"Authorization": headers()["Authorization"]})
    actions = [entry["action"] for entry in audit.json()["entries"]]
    assert {"secret.put", "secret.delete"} <= set(actions)
    assert VALUE not in audit.text


def test_limits_name_their_settings(service: InProcessService) -> None:
    too_long = put(service, "long", org="org-limits", value="x" * 65)
    assert too_long.status_code == 422  # type: ignore[attr-defined]
    assert "SIESTA_EGRESS__MAX_SECRET_BYTES" in too_long.text  # type: ignore[attr-defined]
    for name in ("a", "b", "c"):
        assert put(service, name, org="org-limits").status_code == 200  # type: ignore[attr-defined]
    fourth = put(service, "d", org="org-limits")
    assert fourth.status_code == 409  # type: ignore[attr-defined]
    assert fourth.json()["error"]["code"] == "secret_limit_reached"  # type: ignore[attr-defined]
    assert "SIESTA_EGRESS__MAX_SECRETS_PER_ORG" in fourth.text  # type: ignore[attr-defined]
    line_break = put(service, "a", org="org-limits", value="one\r\nX-Injected: two")
    assert line_break.status_code == 422  # type: ignore[attr-defined]  # a header's value


def test_only_an_admin_token_sets_or_reads_secrets(service: InProcessService) -> None:
    token = {**headers(), "Authorization": f"Bearer {SANDBOX_ONLY}"}
    refused = service.client.get("/v1/secrets", headers=token)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden_scope")


def test_a_conversation_is_offered_its_orgs_secrets_as_placeholders(
    service: InProcessService,
) -> None:
    put(service, "offered")
    conversation = new_conversation()
    url = f"/v1/conversations/{conversation}/sandbox/network"
    offered = service.client.put(
        url, headers=headers(), json={"secrets": [{"secret": "offered", "env": "TOKEN"}]}
    )
    assert offered.status_code == 200, offered.text
    binding = offered.json()["secrets"][0]
    assert binding["env"] == "TOKEN" and binding["placeholder"].startswith("siesta-secret-")
    assert service.client.get(url, headers=headers()).json()["secrets"] == [binding]
    # The same secret offered to another conversation: another placeholder.
    other = service.client.put(
        f"/v1/conversations/{new_conversation()}/sandbox/network",
        headers=headers(),
        json={"secrets": [{"secret": "offered", "env": "TOKEN"}]},
    )
    assert other.json()["secrets"][0]["placeholder"] != binding["placeholder"]
    for body, status, code in [
        ({"secret": "offered", "env": "HTTPS_PROXY"}, 422, "invalid_secret"),
        ({"secret": "offered", "env": "SIESTA_X"}, 422, "invalid_secret"),
        ({"secret": "missing", "env": "TOKEN"}, 404, "secret_not_found"),
    ]:
        refused = service.client.put(url, headers=headers(), json={"secrets": [body]})
        assert (refused.status_code, refused.json()["error"]["code"]) == (status, code), body
    other_org = service.client.put(
        f"/v1/conversations/{new_conversation()}/sandbox/network",
        headers=headers("org-b"),
        json={"secrets": [{"secret": "offered", "env": "TOKEN"}]},
    )
    assert other_org.status_code == 404  # org-a's secret does not exist for org-b
