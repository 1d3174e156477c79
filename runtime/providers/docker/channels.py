"""Agent channels to Docker sandboxes: an attach to the container's PID 1 (the
agent) and a ping. A container without an open stdin was made before the agent
existed: it has no channel (the provider falls back to one engine exec per call).
"""

from __future__ import annotations

import socket
import time
from typing import Any

import docker

from runtime.core.errors import SandboxUnavailable
from runtime.providers.agent.channel import AgentChannel, DockerAttachTransport
from runtime.providers.agent.channels import AgentChannels, pinged_channel
from runtime.providers.docker.errors import docker_errors

RESTART_WAIT_SECONDS = 10.0


def docker_channels(api: docker.APIClient) -> AgentChannels:
    def open_channel(sandbox_id: str) -> AgentChannel | None:
        attrs = _settled(api, sandbox_id)
        if not attrs["Config"].get("OpenStdin"):
            return None
        with docker_errors():
            attached = api.attach_socket(
                sandbox_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
        raw = getattr(attached, "_sock", attached)
        if not isinstance(raw, socket.socket):
            msg = "the sandbox channel needs a unix or tcp connection to the Docker engine"
            raise SandboxUnavailable(msg)
        return pinged_channel(DockerAttachTransport(raw, keep=attached), sandbox_id)

    return AgentChannels(open_channel)


def _settled(api: docker.APIClient, sandbox_id: str) -> dict[str, Any]:
    """The container's description once it is not restarting: after its agent
    died, the engine starts it again (its restart policy) within moments."""
    deadline = time.monotonic() + RESTART_WAIT_SECONDS
    while True:
        with docker_errors():
            attrs: dict[str, Any] = api.inspect_container(sandbox_id)
        if not attrs["State"].get("Restarting") or time.monotonic() > deadline:
            return attrs
        time.sleep(0.05)
