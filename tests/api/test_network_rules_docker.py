"""A conversation's own network rules, end to end: a real service on Docker with
egress on, its own proxy, and one upstream on this host reached by two allowlisted
names. Rules narrow the deployment's list (never widen it), apply to credentials
issued before they changed, and the refusals show in the sandbox's network answer.
"""

from __future__ import annotations

import shlex
from typing import Any

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

CACHE_SECONDS = 0.5


@pytest.fixture(scope="module")
def service(start_service: StartService, upstream: int) -> ServiceProcess:
    settings = egress_to(upstream, "one.test", "two.test")
    settings["SIESTA_EGRESS__ALLOW"] += f",127.0.0.1:{upstream}"  # by address too
    return start_service(
        "docker", **settings, SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS=str(CACHE_SECONDS)
    )


def statuses(service: ServiceProcess, conversation: str, port: int, proxy: str = "") -> str:
    """``one.test`` and ``two.test`` fetched in one command: each one's status and the
    proxy's refusal reason (with ``proxy``: through it, with its credentials)."""
    through = f"-x {shlex.quote(proxy)} " if proxy else ""
    fetch = (
        f"curl -sS -m 20 {through}-D - -o /dev/null -w '{{name}} status=%{{http_code}}\\n' "
        "http://{name}.test:" + str(port) + "/ 2>&1 | grep -Ei '(status=|^x-siesta)'"
    )
    command = "; ".join(fetch.replace("{name}", name) for name in ("one", "two"))
    result = run_command(service.client, conversation, command, timeoutSeconds=60)
    return str(result["stdout"]) + str(result["stderr"])


def applied(
    service: ServiceProcess, conversation: str, port: int, expected: str, proxy: str = ""
) -> str:
    """The statuses once ``expected`` is among them: a proxy applies changed rules
    within its cache period (``CACHE_SECONDS``), not at once."""
    seen = [""]

    def fetched() -> bool:
        seen[0] = statuses(service, conversation, port, proxy)
        return expected in seen[0]

    wait_until(fetched, timeout=15)
    return seen[0]


def put_rules(
    service: ServiceProcess, conversation: str, org: str = "org-a", **rules: Any
) -> dict[str, Any]:
    response = service.client.put(
        f"/v1/conversations/{conversation}/sandbox/network", headers=headers(org), json=rules
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def rules_of(service: ServiceProcess, conversation: str, org: str = "org-a") -> dict[str, Any]:
    response = service.client.get(
        f"/v1/conversations/{conversation}/sandbox/network", headers=headers(org)
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_rules_narrow_a_running_sandbox_and_its_refusals_are_counted(
    service: ServiceProcess, upstream: int
) -> None:
    conversation = new_conversation()
    both = statuses(service, conversation, upstream)
    assert "one status=200" in both and "two status=200" in both, both
    # Credentials issued before any rule was set: the rules reach them too.
    earlier = run_command(service.client, conversation, 'printf %s "$HTTP_PROXY"')["stdout"]

    one = f"one.test:{upstream}"
    answer = put_rules(service, conversation, allow=[one])
    assert answer["allow"] == [one] and answer["effective"] == [one]
    assert answer["deployment"] == [one, f"two.test:{upstream}", f"127.0.0.1:{upstream}"]
    only_one = applied(service, conversation, upstream, "two status=403")
    assert "one status=200" in only_one and "two status=403" in only_one, only_one
    assert "X-Siesta-Egress-Refusal: not_in_sandbox_allow" in only_one, only_one
    assert "two status=403" in statuses(service, conversation, upstream, earlier)

    answer = put_rules(service, conversation, deny=[one])
    assert answer["allow"] is None
    assert answer["effective"] == [f"two.test:{upstream}", f"127.0.0.1:{upstream}"]
    denied = applied(service, conversation, upstream, "one status=403")
    assert "one status=403" in denied and "two status=200" in denied, denied
    assert "X-Siesta-Egress-Refusal: sandbox_deny" in denied, denied

    # Another org naming the same conversation id sets rules of its own conversation.
    assert put_rules(service, conversation, org="org-b", internet=False)["internet"] is False
    assert rules_of(service, conversation)["deny"] == [one]

    assert put_rules(service, conversation, internet=False)["effective"] == []
    off = applied(service, conversation, upstream, "two status=403", earlier)
    assert "one status=403" in off and "two status=403" in off, off
    assert "X-Siesta-Egress-Refusal: internet_off" in off, off

    # Refusals reach the store within a second or so (each proxy adds its tally).
    def last_reason() -> str | None:
        refusals = rules_of(service, conversation)["refusals"]
        return refusals["lastReason"] if refusals else None

    assert wait_until(lambda: last_reason() == "internet_off")
    refusals = rules_of(service, conversation)["refusals"]
    assert refusals["count"] >= 5, refusals  # the five above, and any while rules changed
    assert refusals["lastReason"] == "internet_off", refusals
    assert refusals["lastHost"] in ("one.test", "two.test"), refusals
    assert rules_of(service, conversation, org="org-b")["refusals"] is None
    metrics = service.client.get(
        f"/v1/conversations/{conversation}/sandbox/metrics", headers=headers()
    )
    assert metrics.status_code == 200, metrics.text
    assert metrics.json()["egressRefusals"] == refusals["count"]


def test_addresses_and_ranges_match_where_a_connection_goes(
    service: ServiceProcess, upstream: int
) -> None:
    """The deployment lists the upstream's address: the sandbox reaches it as an IP
    literal. A denied range catches the names that resolve into it; an allowed address
    lets through the names that resolve to it."""
    conversation = new_conversation()
    # --noproxy '': the sandbox's NO_PROXY keeps 127.0.0.1 its own; here it is the host's.
    literal = (
        f"; curl --noproxy '' -sS -m 20 -D - -o /dev/null -w 'literal status=%{{http_code}}\\n' "
        f"http://127.0.0.1:{upstream}/ 2>&1 | grep -Ei '(status=|^x-siesta)'"
    )

    def fetched(expected: str) -> str:
        seen = [""]

        def done() -> bool:
            seen[0] = (
                statuses(service, conversation, upstream)
                + run_command(
                    service.client, conversation, literal.lstrip("; "), timeoutSeconds=60
                )["stdout"]
            )
            return expected in seen[0]

        wait_until(done, timeout=15)
        return seen[0]

    allowed = fetched("literal status=200")
    assert "one status=200" in allowed and "literal status=200" in allowed, allowed

    put_rules(service, conversation, deny=["127.0.0.0/8"])
    denied = fetched("one status=403")
    for name in ("one", "two", "literal"):
        assert f"{name} status=403" in denied, denied
    assert "X-Siesta-Egress-Refusal: sandbox_deny" in denied, denied

    answer = put_rules(service, conversation, allow=[f"127.0.0.1:{upstream}"])
    assert answer["effective"] == [f"127.0.0.1:{upstream}"]
    by_address = fetched("one status=200")
    for name in ("one", "two", "literal"):
        assert f"{name} status=200" in by_address, by_address

    response = service.client.put(
        f"/v1/conversations/{conversation}/sandbox/network",
        headers=headers(),
        json={"allow": [f"127.0.0.2:{upstream}", "10.0.0.0/8"]},
    )
    assert response.status_code == 403, response.text
    assert response.json()["error"]["entries"] == [f"127.0.0.2:{upstream}", "10.0.0.0/8"]


@pytest.mark.parametrize(
    "entry",
    [
        "example.com",  # not in the deployment's list at all
        "one.test",  # in it, but on ports 80 and 443, which it is not listed for
        "*.one.test:{port}",  # names below one it lists, which it does not list
    ],
)
def test_an_entry_wider_than_the_deployments_list_is_refused(
    service: ServiceProcess, upstream: int, entry: str
) -> None:
    conversation, entry = new_conversation(), entry.format(port=upstream)
    response = service.client.put(
        f"/v1/conversations/{conversation}/sandbox/network",
        headers=headers(),
        json={"allow": [entry, f"one.test:{upstream}"]},
    )
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "network_rule_outside_allowlist"
    assert error["entries"] == [entry]
    assert f"one.test:{upstream}, two.test:{upstream}" in error["message"]
    assert rules_of(service, conversation)["allow"] is None


def test_a_fork_starts_with_its_sources_rules(service: ServiceProcess, upstream: int) -> None:
    source, fork = new_conversation(), new_conversation()
    one, two = f"one.test:{upstream}", f"two.test:{upstream}"
    put_rules(service, source, deny=[two])
    assert "two status=403" in applied(service, source, upstream, "two status=403")

    response = service.client.post(
        f"/v1/conversations/{source}/fork", headers=headers(), json={"conversationId": fork}
    )
    assert response.status_code == 201, response.text
    answer = rules_of(service, fork)
    effective = [one, f"127.0.0.1:{upstream}"]
    assert (answer["allow"], answer["deny"], answer["effective"]) == (None, [two], effective)
    # Stored before the fork's sandbox existed: its very first requests obey them.
    first = statuses(service, fork, upstream)
    assert "one status=200" in first and "two status=403" in first, first
    # The fork's rules are its own: changing them leaves the source's as they were.
    put_rules(service, fork, internet=False)
    assert rules_of(service, source)["deny"] == [two]

    # Rules set for the new id before the fork are what its user chose: they stay.
    chosen = new_conversation()
    put_rules(service, chosen, allow=[one])
    response = service.client.post(
        f"/v1/conversations/{source}/fork", headers=headers(), json={"conversationId": chosen}
    )
    assert response.status_code == 201, response.text
    answer = rules_of(service, chosen)
    assert (answer["allow"], answer["deny"]) == ([one], [])
