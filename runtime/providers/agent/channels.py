"""The open agent channels of one service instance: one per sandbox, kept open.

A channel is opened on a sandbox's first operation in this instance (by the
provider's opener: a Docker attach, a Kubernetes attach), reused by every later
one (``inside.py``), and dropped by the provider's lifecycle when the sandbox stops
or goes away. An opener returns ``None`` for a sandbox without an agent (made before
the agent existed): Docker's inside then falls back to an engine exec.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from runtime.core.errors import SandboxUnavailable
from runtime.providers.agent.channel import AgentChannel, ChannelClosed, Transport

PING_SECONDS = 10.0
"""How long a new channel may take to answer its first ping (a busy sandbox)."""

ChannelOpener = Callable[[str], "AgentChannel | None"]


def pinged_channel(
    transport: Transport, name: str, stall_seconds: float | None = None, *, private: bool = False
) -> AgentChannel:
    """A channel over ``transport`` whose agent has answered a ping (``stall_seconds``,
    ``private``: see ``AgentChannel``)."""
    channel = AgentChannel(transport, name, stall_seconds, private=private)
    try:
        channel.ping(PING_SECONDS)
    except (ChannelClosed, TimeoutError) as exc:
        channel.close()
        msg = f"the sandbox's agent did not answer within {PING_SECONDS:g} seconds; try again"
        raise SandboxUnavailable(msg) from exc
    return channel


class AgentChannels:
    def __init__(self, opener: ChannelOpener) -> None:
        self._opener = opener
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
        channel = self._opener(sandbox_id)
        with self._lock:
            if channel is None:
                self._without_agent.add(sandbox_id)
                return None
            other = self._channels.get(sandbox_id)
            if other is not None and not other.closed:
                # Opened meanwhile by another thread, which may be using it already:
                # keep that one (closing it would end that thread's request).
                spare, channel = channel, other
            else:
                self._channels[sandbox_id] = channel
                spare = None
        if spare is not None:
            spare.close()
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
