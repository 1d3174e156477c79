"""Egress, attacked from inside real sandboxes: the allowlisted Debian mirror works
through the real proxy; every other way out is closed, and says why.

The service allows the mirror the sandbox images use (read from an image's apt
sources) and three names pinned to addresses a sandbox must never reach.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.helpers import (
    ServiceProcess,
    StartService,
    free_port,
    headers,
    new_conversation,
    run_command,
    sandbox_of,
    wait_until,
)

pytestmark = [pytest.mark.docker]

PINNED = {
    "listed-private.test": "10.0.0.7",
    "listed-metadata.test": "169.254.169.254",
    "listed-loopback.test": "127.0.0.1",
}


@pytest.fixture(scope="module")
def service(start_service: StartService, mirror: str) -> ServiceProcess:
    return start_service(
        "docker",
        SIESTA_EGRESS__ALLOW=",".join([mirror, *PINNED]),
        SIESTA_EGRESS__HOSTS=json.dumps(PINNED),
    )


def probe(service: ServiceProcess, command: str, image: str = "debian-base", **hdrs: str) -> str:
    conversation = hdrs.pop("conversation", None) or new_conversation()
    response = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": command, "timeoutSeconds": 300},
        headers={**headers(image=image), **hdrs},
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return str(result["stdout"]) + str(result["stderr"])


def test_apt_get_installs_through_the_allowlisted_mirror(
    service: ServiceProcess, mirror: str
) -> None:
    # Root in the sandbox is a remapped uid with six capabilities: enough for apt.
    install = (
        "apt-get update && apt-get install -y -q --no-install-recommends tree && tree --version"
    )
    result = run_command(service.client, new_conversation(), install, timeoutSeconds=300)
    assert result["exitCode"] == 0, result["stdout"][-2000:] + result["stderr"][-2000:]
    assert f"http://{mirror}/debian bookworm" in result["stdout"]
    assert "tree v" in result["stdout"]
    # HTTPS goes through CONNECT: TLS is end to end. (-k: some networks, this CI's
    # among them, re-sign TLS with a CA the host trusts and the images do not.)
    out = probe(
        service, f"curl -sSk -o /dev/null -w 'https=%{{http_code}}' https://{mirror}/debian/"
    )
    assert "https=200" in out


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # A host not on the list, over HTTP and over HTTPS.
        ("curl -sS -m 20 http://example.com/", "example.com:80 is not in the egress allowlist"),
        ("curl -sS -m 20 https://example.com/", "CONNECT tunnel failed, response 403"),
        # Addresses instead of names, through the proxy and around it.
        ("curl -sS -m 20 http://169.254.169.254/latest/", "addresses are refused"),
        ("curl -sS -m 5 --noproxy '*' http://169.254.169.254/ || echo direct=$?", "direct="),
        ("curl -sS -m 5 --noproxy '*' http://1.1.1.1/ || echo direct=$?", "direct="),
        # Listed names that resolve where a sandbox must never go.
        ("curl -sS -m 20 http://listed-private.test/", "resolves to 10.0.0.7, a private address"),
        ("curl -sS -m 20 http://listed-metadata.test/", "a cloud metadata address"),
        ("curl -sS -m 20 http://listed-loopback.test/", "a loopback address"),
        # No DNS: a sandbox cannot resolve (or tunnel out through) a name itself.
        ("getent hosts example.com || echo dns=$?", "dns=2"),
        # Without credentials the proxy does not know the caller, and refuses.
        (
            "curl -sS -m 20 -x http://${HTTP_PROXY##*@} http://example.com/ -o /dev/null "
            "-w 'status=%{http_code}'",
            "status=407",
        ),
    ],
)
def test_every_other_way_out_is_refused(
    service: ServiceProcess, command: str, expected: str
) -> None:
    assert expected in probe(service, command)


def test_raw_sockets_are_not_allowed(service: ServiceProcess) -> None:
    out = probe(
        service,
        "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'",
        image="python",
    )
    assert "PermissionError" in out


def test_refusals_are_counted_by_org_and_reason_and_logged_with_the_host(
    service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    probe(service, "curl -sS -m 20 http://refused-host.example/", conversation=conversation)
    sample = 'siesta_egress_refusals_total{org="org-a",reason="host_not_allowed"}'
    assert wait_until(lambda: sample in service.client.get("/metrics").text), sample
    assert "refused-host.example" not in service.client.get("/metrics").text
    logged = f"egress refused for org-a/{conversation}: refused-host.example:80"
    assert wait_until(lambda: logged in service.log(tail=None)), logged


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on all of the host's addresses, as many host services are."""
    server = socket.create_server(("0.0.0.0", free_port()))
    accepted: list[socket.socket] = []
    server.settimeout(0.2)

    def accept() -> None:
        while server.fileno() != -1:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()
    for conn in accepted:
        conn.close()


def test_the_host_is_reachable_only_at_the_proxy_port(
    service: ServiceProcess, host_server: int, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "true")
    container = docker_client.containers.get(sandbox_of(service, conversation))
    network = docker_client.networks.get(container.attrs["HostConfig"]["NetworkMode"])
    gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
    reach = 'timeout 3 bash -c "echo > /dev/tcp/{}/{}" && echo open || echo closed'
    out = probe(
        service,
        reach.format(gateway, 3128) + "; " + reach.format(gateway, host_server),
        conversation=conversation,
    )
    assert out.split() == ["open", "closed"]


def test_sandboxes_cannot_reach_each_other(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    server, client = new_conversation(), new_conversation()
    started = probe(
        service,
        "(setsid python3 -m http.server 8000 >/dev/null 2>&1 &); sleep 1; "
        "curl -s -o /dev/null -w 'local=%{http_code}' http://127.0.0.1:8000/",
        image="python",
        conversation=server,
    )
    assert "local=200" in started
    networks = docker_client.containers.get(sandbox_of(service, server)).attrs["NetworkSettings"]
    address = next(iter(networks["Networks"].values()))["IPAddress"]
    out = probe(
        service,
        f'timeout 3 bash -c "echo > /dev/tcp/{address}/8000" && echo open || echo closed',
        image="python",
        conversation=client,
    )
    assert out.strip() == "closed"


@pytest.mark.parametrize(
    ("narrowing", "target", "reached"),
    [
        ("{mirror}", "http://{mirror}/debian/", True),
        ("listed-private.test", "http://{mirror}/debian/", False),  # narrowed away
        ("", "http://{mirror}/debian/", False),  # an empty list: no network at all
        ("example.com,{mirror}", "http://example.com/", False),  # cannot widen
    ],
)
def test_the_agent_narrows_the_allowlist_and_never_widens_it(
    service: ServiceProcess, mirror: str, narrowing: str, target: str, reached: bool
) -> None:
    out = probe(
        service,
        f"curl -sS -m 20 -o /dev/null -w 'status=%{{http_code}}' {target.format(mirror=mirror)}",
        **{"X-Siesta-Egress-Allow": narrowing.format(mirror=mirror)},
    )
    assert ("status=200" in out) is reached, out


def test_a_bad_narrowing_is_refused_with_the_header_named(service: ServiceProcess) -> None:
    response = service.client.post(
        f"/v1/conversations/{new_conversation()}/sandbox/runCommand",
        json={"command": "true"},
        headers={**headers(), "X-Siesta-Egress-Allow": "10.0.0.1"},
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_request", error
    assert "x-siesta-egress-allow" in error["message"].lower(), error


def _proxy_pids(service: ServiceProcess) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/cmdline") as cmd:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                command = cmd.read()
        except OSError:
            continue
        if parent == service.process.pid and "runtime.egress.server" in command:
            pids.append(int(entry))
    return pids


def test_a_dead_proxy_is_started_again(service: ServiceProcess, mirror: str) -> None:
    (first,) = _proxy_pids(service)
    os.kill(first, signal.SIGKILL)
    assert wait_until(lambda: len(_proxy_pids(service)) == 1 and _proxy_pids(service) != [first])
    out = probe(
        service, f"curl -sS -o /dev/null -w 'status=%{{http_code}}' http://{mirror}/debian/"
    )
    assert "status=200" in out
    assert "the egress proxy exited" in service.log(tail=None)


def test_nothing_of_the_host_is_mounted(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "true")
    attrs = docker_client.containers.get(sandbox_of(service, conversation)).attrs
    name = attrs["Name"].lstrip("/")
    assert [(m["Type"], m["Name"], m["Destination"]) for m in attrs["Mounts"]] == [
        ("volume", name, "/mnt/work")
    ]
    assert attrs["HostConfig"]["Binds"] == [f"{name}:/mnt/work:rw"]
    assert not attrs["HostConfig"]["Privileged"]
    assert not attrs["HostConfig"].get("Devices")
    assert attrs["HostConfig"]["NetworkMode"].startswith("siesta-sandboxes-")
    assert "docker.sock" not in json.dumps(attrs)
