"""A deleted conversation's egress credentials stop working, end to end: a real service
on Docker with egress on, its own proxy, and an upstream on this host.

The credentials a sandbox's commands get are in their environment, so anything in
the sandbox can copy them out, into another conversation's sandbox for one. Once the
conversation they belong to is deleted, the proxy refuses them there too; the other
conversation's own credentials, and a new conversation with the deleted one's id,
keep working.
"""

from __future__ import annotations

import shlex

import pytest

from tests.egress_upstream import egress_to
from tests.helpers import (
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_command,
    wait_until,
)

pytestmark = [pytest.mark.docker]

POLL_SECONDS = 0.5


@pytest.fixture(scope="module")
def service(start_service: StartService, upstream: int) -> ServiceProcess:
    return start_service(
        "docker",
        **egress_to(upstream, "upstream.test"),
        SIESTA_EGRESS__REVOCATION_POLL_SECONDS=str(POLL_SECONDS),
    )


def fetch(upstream: int, proxy: str = "", scheme: str = "http") -> str:
    """A shell command printing the proxy's refusal reason (if any) and the status."""
    through = f"-x {shlex.quote(proxy)} " if proxy else ""
    return (
        f"curl -sS -m 20 {through}-D - -o /dev/null -w 'status=%{{http_code}}\\n' "
        f"{scheme}://upstream.test:{upstream}/ 2>&1 | grep -Ei '^(status=|x-siesta|curl:)'"
    )


def output(service: ServiceProcess, conversation: str, command: str) -> str:
    result = run_command(service.client, conversation, command, timeoutSeconds=60)
    return str(result["stdout"]) + str(result["stderr"])


def test_credentials_copied_out_of_a_deleted_conversation_are_refused(
    service: ServiceProcess, upstream: int
) -> None:
    deleted, other = new_conversation(), new_conversation()
    copied = output(service, deleted, 'printf %s "$HTTPS_PROXY"').strip()
    assert copied.startswith("http://s1.")
    assert "status=200" in output(service, deleted, fetch(upstream))
    # Copied into another conversation's sandbox, they work there: for now.
    assert "status=200" in output(service, other, fetch(upstream, copied))

    response = service.client.delete(f"/v1/conversations/{deleted}", headers=headers())
    assert response.status_code == 200, response.text
    assert response.json()["deleted"] is True

    # Refused within the proxy's poll interval (the loop waits at most 10 s).
    waited = output(
        service,
        other,
        f"for i in $(seq 40); do out=$({fetch(upstream, copied)}); "
        'case "$out" in *status=407*) break;; esac; sleep 0.25; done; echo "$out"',
    )
    assert "status=407" in waited, waited
    assert "X-Siesta-Egress-Refusal: credentials_revoked" in waited, waited
    tunnel = output(service, other, fetch(upstream, copied, scheme="https"))
    assert "CONNECT tunnel failed, response 407" in tunnel, tunnel

    # The other conversation's own credentials work; so do the new ones of a
    # conversation made again with the deleted one's id.
    assert "status=200" in output(service, other, fetch(upstream))
    assert "status=200" in output(service, deleted, fetch(upstream))

    sample = 'siesta_egress_refusals_total{org="org-a",reason="credentials_revoked"}'
    assert wait_until(lambda: sample in service.client.get("/metrics").text), sample
