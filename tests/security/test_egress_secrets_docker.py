"""Secrets at egress, end to end: a real service on Docker with its own proxy, and
HTTPS servers on this host with certificates of their own authority.

The org sets a secret for one host; a conversation is offered it. Its sandbox holds a
placeholder, `curl`s the host through the proxy, and the server receives the real
value. The same placeholder sent to another host arrives as it is. A server whose
certificate the proxy cannot verify gets nothing. The value is nowhere a sandbox, a
log, the executions log, the audit or a snapshot could show it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2b import Sandbox

from tests.e2b.conftest import ORG_A, TOKEN_A, E2bService
from tests.egress_upstream import TlsUpstream, serving_tls
from tests.helpers import (
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_command,
    tokens_setting,
)

pytestmark = [pytest.mark.docker]

VALUE = "real-" + uuid.uuid4().hex
"""The secret: never in a sandbox, an answer or a log."""
FIND_VALUE = (
    f"A={VALUE[:9]}; B={VALUE[9:]}; "  # the command itself must not hold the value
    'grep -rlF "$A$B" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; true'
)
"""Lists the files of the sandbox that hold the value."""


@pytest.fixture(scope="module")
def target() -> Iterator[TlsUpstream]:
    with serving_tls("target.test") as server:
        yield server


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[TlsUpstream]:
    with serving_tls("elsewhere.test") as server:
        yield server


@pytest.fixture(scope="module")
def impostor() -> Iterator[TlsUpstream]:
    """A server for a host the secret may go to, whose certificate no one trusts."""
    with serving_tls("impostor.test") as server:
        yield server


@pytest.fixture(scope="module")
def service(
    start_service: StartService,
    target: TlsUpstream,
    elsewhere: TlsUpstream,
    impostor: TlsUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> ServiceProcess:
    trusted = tmp_path_factory.mktemp("upstream-ca") / "ca.pem"
    trusted.write_text(target.ca_pem + elsewhere.ca_pem)  # not the impostor's
    hosts = {
        "target.test": target.port,
        "elsewhere.test": elsewhere.port,
        "impostor.test": impostor.port,
    }
    return start_service(
        "docker",
        SIESTA_TOKENS=tokens_setting(("e2b-a", TOKEN_A, ["sandbox"], ORG_A)),
        SIESTA_EGRESS__ALLOW=",".join(f"{name}:{port}" for name, port in hosts.items()),
        SIESTA_EGRESS__HOSTS=json.dumps({name: "127.0.0.1" for name in hosts}),
        SIESTA_EGRESS__ALLOWED_PRIVATE_NETWORKS='["127.0.0.0/8"]',
        SIESTA_EGRESS__SECRETS_KEY="test-secrets-key-" + uuid.uuid4().hex,
        SIESTA_EGRESS__UPSTREAM_CA_FILE=str(trusted),
        SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS="0.5",
    )


def put_secret(service: ServiceProcess, name: str, hosts: list[str]) -> None:
    response = service.client.put(
        f"/v1/secrets/{name}", headers=headers(), json={"value": VALUE, "hosts": hosts}
    )
    assert response.status_code == 200, response.text
    assert VALUE not in response.text


def offer(service: ServiceProcess, conversation: str, *bindings: dict[str, str]) -> dict:  # type: ignore[type-arg]
    response = service.client.put(
        f"/v1/conversations/{conversation}/sandbox/network",
        headers=headers(),
        json={"secrets": list(bindings)},
    )
    assert response.status_code == 200, response.text
    answer: dict = response.json()  # type: ignore[type-arg]
    return answer


def test_the_host_gets_the_secret_and_nothing_else_ever_sees_it(
    service: ServiceProcess,
    target: TlsUpstream,
    elsewhere: TlsUpstream,
    impostor: TlsUpstream,
) -> None:
    put_secret(
        service, "api-token", [f"target.test:{target.port}", f"impostor.test:{impostor.port}"]
    )
    conversation = new_conversation()
    offered = offer(service, conversation, {"secret": "api-token", "env": "API_TOKEN"})
    placeholder = offered["secrets"][0]["placeholder"]
    assert placeholder.startswith("siesta-secret-") and VALUE not in json.dumps(offered)

    # The host the secret is for: the server gets the value, over TLS the proxy
    # verified; the sandbox trusts the proxy's authority from its start (no -k).
    fetched = run_command(
        service.client,
        conversation,
        'curl -sS -m 20 -H "Authorization: Bearer $API_TOKEN" -H "X-Other: $API_TOKEN" '
        f"https://target.test:{target.port}/data",
        timeoutSeconds=60,
    )
    assert fetched["exitCode"] == 0, fetched["stderr"]
    assert fetched["stdout"] == "ok"
    got = target.seen[-1]
    assert got["authorization"] == f"Bearer {VALUE}"
    assert got["x-other"] == placeholder  # only the header the secret names

    # Anywhere else the placeholder goes as it is (an opaque tunnel: the sandbox
    # checks nothing of that server here, hence -k).
    sent = run_command(
        service.client,
        conversation,
        f'curl -sSk -m 20 -H "Authorization: Bearer $API_TOKEN" https://elsewhere.test:{elsewhere.port}/',
        timeoutSeconds=60,
    )
    assert sent["exitCode"] == 0, sent["stderr"]
    assert elsewhere.seen[-1]["authorization"] == f"Bearer {placeholder}"

    # A server for a host the secret may go to, whose certificate does not verify:
    # 502, and it receives no request at all.
    refused = run_command(
        service.client,
        conversation,
        'curl -sS -m 20 -o /dev/null -w "%{http_code}" '
        f'-H "Authorization: Bearer $API_TOKEN" https://impostor.test:{impostor.port}/',
        timeoutSeconds=60,
    )
    assert refused["stdout"] == "502", refused
    assert impostor.seen == []

    # Nowhere the sandbox can look: its environment, its files.
    inside = run_command(
        service.client,
        conversation,
        f"env; {FIND_VALUE}",
        timeoutSeconds=120,
    )
    assert placeholder in inside["stdout"]
    assert VALUE not in inside["stdout"] + inside["stderr"]

    # Nor a snapshot of it, started as another conversation.
    snapshot = service.client.post(
        f"/v1/conversations/{conversation}/snapshots", headers=headers(), json={}
    )
    assert snapshot.status_code == 201, snapshot.text
    fork = new_conversation()
    started = service.client.post(
        f"/v1/snapshots/{snapshot.json()['snapshotId']}/conversations",
        headers=headers(),
        json={"conversationId": fork},
    )
    assert started.status_code in (200, 201), started.text
    in_fork = run_command(
        service.client,
        fork,
        f"env; {FIND_VALUE}",
        timeoutSeconds=120,
    )
    assert VALUE not in in_fork["stdout"] + in_fork["stderr"]

    # Nor the service's answers, log, executions log or audit.
    answers = [
        service.client.get("/v1/secrets", headers=headers()).text,
        service.client.get(
            f"/v1/conversations/{conversation}/sandbox/network", headers=headers()
        ).text,
        service.client.get(
            "/v1/tools/executions", headers=headers(), params={"conversationId": conversation}
        ).text,
        service.client.get(
            "/v1/admin/audit", headers={"Authorization": headers()["Authorization"]}
        ).text,
    ]
    for answer in answers:
        assert VALUE not in answer, answer
    assert VALUE not in service.log(tail=None)
    assert VALUE not in "".join(
        path.read_text(errors="replace") for path in Path(service.data_dir).rglob("*.log")
    )


def test_a_placeholder_is_worthless_from_another_conversation(
    service: ServiceProcess, target: TlsUpstream
) -> None:
    put_secret(service, "shared", [f"target.test:{target.port}"])
    owner, other = new_conversation(), new_conversation()
    placeholder = offer(service, owner, {"secret": "shared", "env": "TOKEN"})["secrets"][0][
        "placeholder"
    ]
    offer(service, other, {"secret": "shared", "env": "TOKEN"})
    # The other conversation sends the owner's placeholder (copied out of band): its
    # own bindings' placeholders differ, so nothing is replaced.
    sent = run_command(
        service.client,
        other,
        f'curl -sS -m 20 -H "Authorization: Bearer {placeholder}" https://target.test:{target.port}/',
        timeoutSeconds=60,
    )
    assert sent["exitCode"] == 0, sent["stderr"]
    assert target.seen[-1]["authorization"] == f"Bearer {placeholder}"


def test_offering_a_secret_the_org_does_not_have_is_refused(service: ServiceProcess) -> None:
    response = service.client.put(
        f"/v1/conversations/{new_conversation()}/sandbox/network",
        headers=headers(org="org-b"),
        json={"secrets": [{"secret": "api-token", "env": "API_TOKEN"}]},
    )
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "secret_not_found"


def test_e2b_header_transforms_are_set_by_the_proxy_and_never_logged(
    service: ServiceProcess, target: TlsUpstream, elsewhere: TlsUpstream
) -> None:
    e2b = E2bService(service)
    host = f"target.test:{target.port}"
    network = {"rules": {host: [{"transform": {"headers": {"X-Routing-Id": VALUE}}}]}}
    sandbox = Sandbox.create("base", network=network, **e2b.options())  # type: ignore[arg-type]
    try:
        done = sandbox.commands.run(
            f'curl -sS -m 20 -H "X-Routing-Id: mine" https://{host}/; '
            f"curl -sSk -m 20 https://elsewhere.test:{elsewhere.port}/"
        )
        assert done.stdout == "okok"
        assert target.seen[-1]["x-routing-id"] == VALUE  # set over what the sandbox sent
        assert "x-routing-id" not in elsewhere.seen[-1]
        sandbox.update_network(
            {"rules": {host: [{"transform": {"headers": {"X-Routing-Id": VALUE + "2"}}}]}}
        )
        log = service.client.get(
            "/v1/tools/executions", headers=headers(org=ORG_A), params={"limit": 1000}
        )
        assert log.status_code == 200 and VALUE not in log.text
        update = next(e for e in log.json()["executions"] if e["function"] == "setNetworkRules")
        # In the log, masked (a header of any name: not only secret-looking ones).
        assert update["arguments"]["rules"][host] == [
            {"transform": {"headers": {"X-Routing-Id": "[redacted]"}}}
        ]
        assert VALUE not in service.log(tail=None)
    finally:
        sandbox.kill()
