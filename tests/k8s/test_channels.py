"""The Kubernetes provider's channels to a sandbox's agent: each instance's own (a pod
exec of the agent's relay), and the shared attach where that exec cannot serve.

"Another instance" is watched at the wire: a stream of the test's own to the same pod
pings the agent, and everything it receives up to the PONG is what that instance
would have been sent. The agent writes a request's frames before it answers a later
ping, so frames of a finished request sent to every client come before that PONG.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import kubernetes.client
import pytest
from kubernetes.stream import stream

from runtime.providers.agent.protocol import AGENT_FRAMES_V3, Frame, FrameReader, FrameType, encode
from runtime.providers.kubernetes.channels import RELAY, AttachTransport
from runtime.providers.kubernetes.objects import CONTAINER
from runtime.providers.kubernetes.provider import KubernetesProvider
from runtime.seams.providers import SandboxSpec
from tests.k8s.apiserver import KUBERNETES_NAMESPACE, ApiServerDouble
from tests.k8s.conftest import IMAGE, provider_for, run

pytestmark = pytest.mark.docker

OBSERVER_PING = 4242


def wire(api: ApiServerDouble, name: str, *, private: bool) -> AttachTransport:
    """A stream of the test's own to the pod's agent: an exec of the relay (a channel
    of its own), else the attach (the agent's stdin and stdout, shared)."""
    configuration = kubernetes.client.Configuration()
    configuration.host = api.url
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    options = {"command": RELAY} if private else {}
    connect = (
        core.connect_get_namespaced_pod_exec if private else core.connect_get_namespaced_pod_attach
    )
    client = stream(
        connect,
        name,
        KUBERNETES_NAMESPACE,
        container=CONTAINER,
        stdin=True,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
        binary=True,
        **options,
    )
    client.sock.settimeout(10)
    return AttachTransport(client)


def seen_until_pong(transport: AttachTransport) -> list[Frame]:
    """Every frame the stream has been sent, up to the PONG of a ping sent now."""
    transport.send(encode(FrameType.PING, OBSERVER_PING))
    reader = FrameReader(AGENT_FRAMES_V3)
    seen: list[Frame] = []
    for stream_number, chunk in transport.receive():
        if stream_number != 1:
            continue
        for frame in reader.feed(chunk):
            if frame.type is FrameType.PONG and frame.id == OBSERVER_PING:
                return seen
            seen.append(frame)
    msg = f"the stream ended without a PONG, after {seen}"
    raise AssertionError(msg)


def streams_opened(api: ApiServerDouble, name: str, kind: str, since: int) -> int:
    path = f"/api/v1/namespaces/{KUBERNETES_NAMESPACE}/pods/{name}/{kind}"
    return sum(1 for request in api.requests[since:] if request.path == path)


@pytest.fixture
def two(api: ApiServerDouble) -> Iterator[tuple[KubernetesProvider, KubernetesProvider]]:
    """Two service instances on one API server."""
    first, second = provider_for(api), provider_for(api)
    yield first, second
    first.close()
    second.close()


def test_each_instance_has_a_channel_of_its_own(
    api: ApiServerDouble, two: tuple[KubernetesProvider, KubernetesProvider]
) -> None:
    first, second = two
    name = first.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    try:
        own, shared = wire(api, name, private=True), wire(api, name, private=False)
        ran = run(first, name, "echo from-the-first")
        ran_too = run(second, name, "echo from-the-second")
        channels = [p.lifecycle.channels.existing(name) for p in two]
        seen_by_a_third, seen_by_the_attach = seen_until_pong(own), seen_until_pong(shared)
        own.close()
        shared.close()
    finally:
        first.lifecycle.destroy(name)
    assert (ran, ran_too) == ("from-the-first\n", "from-the-second\n")
    assert [c is not None and c.private for c in channels] == [True, True]
    # Neither instance's SPAWN, OUT or EXIT reached another stream to the agent.
    assert seen_by_a_third == [] and seen_by_the_attach == []


def test_under_gvisor_each_instance_has_a_channel_of_its_own_too(api: ApiServerDouble) -> None:
    """gVisor's kernel does not say who a socket's peer is; the agent lets each relay in
    by the credentials its first byte carries, so each instance has its own channel."""
    api.runtime_classes["gvisor"] = "runsc"
    first = provider_for(api, runtime_class="gvisor")
    second = provider_for(api, runtime_class="gvisor")
    name = first.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    try:
        ran = run(first, name, "echo under-gvisor")
        ran_too = run(second, name, "echo and-again")
        channels = [p.lifecycle.channels.existing(name) for p in (first, second)]
    finally:
        first.lifecycle.destroy(name)
        first.close()
        second.close()
    assert (ran, ran_too) == ("under-gvisor\n", "and-again\n")
    assert [c is not None and c.private for c in channels] == [True, True]


def test_a_role_without_pods_exec_leaves_the_attach(
    api: ApiServerDouble, provider: KubernetesProvider
) -> None:
    api.faults.exec_forbidden = True
    name = provider.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    try:
        ran = run(provider, name, "echo attached")
        channel = provider.lifecycle.channels.existing(name)
    finally:
        provider.lifecycle.destroy(name)
    assert ran == "attached\n"
    assert channel is not None and not channel.private


def test_an_agent_without_private_channels_leaves_the_attach(
    api: ApiServerDouble, provider: KubernetesProvider
) -> None:
    """An agent of protocol 2 exits 127 at once when given ``--channel``: here the
    relay's path is such a program (put there as root from outside, as an older image
    would have it). The pod is not asked again while it runs; a new pod is (made from
    the image, its relay is one: its channel is the instance's own)."""
    first = len(api.requests)
    name = provider.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    try:
        container = api.docker.containers.get(api._container(KUBERNETES_NAMESPACE, name))
        old_agent = f"mv {RELAY[0]} {RELAY[0]}.3 && printf '#!/bin/sh\\nexit 127\\n' > {RELAY[0]}"
        result = container.exec_run(["sh", "-c", f"{old_agent} && chmod 755 {RELAY[0]}"], user="0")
        assert result.exit_code == 0, result.output
        started = time.monotonic()
        ran = run(provider, name, "echo attached")
        seconds = time.monotonic() - started
        channel = provider.lifecycle.channels.existing(name)
        provider.lifecycle.channels.drop(name)  # as when the stream breaks: opened again
        assert run(provider, name, "true") == ""
        asked = streams_opened(api, name, "exec", first)
        provider.lifecycle.stop(name)
        provider.lifecycle.start(name)
        assert run(provider, name, "true") == ""
        asked_again = streams_opened(api, name, "exec", first)
        renewed = provider.lifecycle.channels.existing(name)
    finally:
        provider.lifecycle.destroy(name)
    assert ran == "attached\n"
    assert channel is not None and not channel.private
    assert seconds < 5  # the exec's end is the answer: no ping timeout is waited out
    assert (asked, asked_again) == (1, 2)  # asked once per pod
    assert renewed is not None and renewed.private
