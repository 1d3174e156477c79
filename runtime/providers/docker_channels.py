"""Agent channels to Docker sandboxes: one attach stream per sandbox, kept open.

Opened on a sandbox's first operation in this instance (an attach to the
container's PID 1, the agent, and a ping), reused by every later one, dropped
when the sandbox stops or goes away. A sandbox made before the agent existed
(no open stdin) has none: the provider falls back to one engine exec per call.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import docker

from runtime.errors import SandboxUnavailable
from runtime.providers.agent_channel import AgentChannel, ChannelClosed, DockerAttachTransport
from runtime.providers.docker_errors import docker_errors

RESTART_WAIT_SECONDS = 10.0
PING_SECONDS = 10.0
"""How long a new channel may take to answer its first ping (a busy sandbox)."""


class DockerChannels:
    def __init__(self, api: docker.APIClient) -> None:
        self._api = api
        self._channels: dict[str, AgentChannel] = {}
        self._without_agent: set[str] = set()
        self._lock = threading.Lock()

    def get(self, sandbox_id: str) -> AgentChannel | None:
        """The sandbox's open channel, opened now if needed; ``None`` for a sandbox
        without an agent."""
        with self._lock:
            channel = self._channels.get(sandbox_id)
            if channel is not None and not channel.closed:
                return channel
            if sandbox_id in self._without_agent:
                return None
        attrs = self._settled(sandbox_id)
        if not attrs["Config"].get("OpenStdin"):
            with self._lock:
                self._without_agent.add(sandbox_id)
            return None
        channel = self._open(sandbox_id)
        with self._lock:
            stale = self._channels.get(sandbox_id)
            self._channels[sandbox_id] = channel
        if stale is not None:
            stale.close()
        return channel

    def existing(self, sandbox_id: str) -> AgentChannel | None:
        """The open channel if there is one; never opens one (for cancelling)."""
        with self._lock:
            channel = self._channels.get(sandbox_id)
        return channel if channel is not None and not channel.closed else None

    def has_agent(self, sandbox_id: str) -> bool:
        with self._lock:
            return sandbox_id not in self._without_agent

    def drop(self, sandbox_id: str) -> None:
        with self._lock:
            channel = self._channels.pop(sandbox_id, None)
            self._without_agent.discard(sandbox_id)
        if channel is not None:
            channel.close()

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()

    def _settled(self, sandbox_id: str) -> dict[str, Any]:
        """The container's description once it is not restarting: after its agent
        died, the engine starts it again (its restart policy) within moments."""
        deadline = time.monotonic() + RESTART_WAIT_SECONDS
        while True:
            with docker_errors():
                attrs: dict[str, Any] = self._api.inspect_container(sandbox_id)
            if not attrs["State"].get("Restarting") or time.monotonic() > deadline:
                return attrs
            time.sleep(0.05)

    def _open(self, sandbox_id: str) -> AgentChannel:
        with docker_errors():
            attached = self._api.attach_socket(
                sandbox_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
        raw = getattr(attached, "_sock", attached)
        if not isinstance(raw, socket.socket):
            msg = "the sandbox channel needs a unix or tcp connection to the Docker engine"
            raise SandboxUnavailable(msg)
        channel = AgentChannel(DockerAttachTransport(raw, keep=attached), sandbox_id)
        try:
            channel.ping(PING_SECONDS)
        except (ChannelClosed, TimeoutError) as exc:
            channel.close()
            msg = f"the sandbox's agent did not answer within {PING_SECONDS:g} seconds; try again"
            raise SandboxUnavailable(msg) from exc
        return channel
