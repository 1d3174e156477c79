"""How the Docker provider opens a channel to a sandbox's agent, and a ping.

First a channel of this instance's own: an engine exec of ``siesta-agent --channel``,
which relays to the agent's socket (protocol 3; any number of instances at once, each
with its own replies, so any of them may serve the sandbox's processes). Where that
cannot answer (an agent of protocol 2, which runs ``--channel`` as a command and fails),
the attach to the container's PID 1, shared by every instance. Under gVisor the relay
is let in by the credentials of its first byte (its kernel does not name a socket's
peer). A container without an
open stdin was made before the agent existed: it has no channel (``inside.py`` falls
back to one engine exec per call).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import docker

from runtime.core import metrics
from runtime.core.errors import SandboxUnavailable
from runtime.providers.agent.channel import AgentChannel
from runtime.providers.agent.channels import AgentChannels, pinged_channel
from runtime.providers.docker.errors import docker_errors

RESTART_WAIT_SECONDS = 10.0
AGENT = "/usr/local/lib/siesta/siesta-agent"
log = logging.getLogger(__name__)


class DockerStreamFrames:
    """Docker's multiplexed stream (Tty off): 8-byte headers (stream, size), then data.

    Data is passed on as it arrives, so nothing but a header is ever held here,
    whatever size a header claims."""

    def __init__(self) -> None:
        self._header = bytearray()
        self._stream = 0
        self._left = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """The (stream, chunk) pieces in ``data``: parts of frames, in order."""
        pieces = []
        view = memoryview(data)
        while view:
            if self._left == 0:
                take = 8 - len(self._header)
                self._header += view[:take]
                view = view[take:]
                if len(self._header) == 8:
                    self._stream = self._header[0]
                    self._left = int.from_bytes(self._header[4:8], "big")
                    self._header.clear()
                continue
            piece = view[: self._left]
            view = view[len(piece) :]
            self._left -= len(piece)
            pieces.append((self._stream, bytes(piece)))
        return pieces


class DockerAttachTransport:
    """A hijacked ``/containers/{id}/attach`` socket (Tty off: 8-byte stream headers)."""

    def __init__(self, sock: socket.socket, keep: object = None) -> None:
        self._sock = sock
        self._keep = keep  # the SDK's wrapper: collected, it would close the socket

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def receive(self) -> Iterator[tuple[int, bytes]]:
        frames = DockerStreamFrames()
        while True:
            try:
                data = self._sock.recv(256 * 1024)
            except OSError:
                return
            if not data:
                return
            yield from frames.feed(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def docker_channels(api: docker.APIClient, stall_seconds: float | None = None) -> AgentChannels:
    def open_channel(sandbox_id: str) -> AgentChannel | None:
        with metrics.create_phase("attach"):
            return _open(sandbox_id)

    def _open(sandbox_id: str) -> AgentChannel | None:
        attrs = _settled(api, sandbox_id)
        if not attrs["Config"].get("OpenStdin"):
            return None
        try:
            private = _exec_channel(sandbox_id)
        except SandboxUnavailable:  # it began restarting since (its agent died): settle
            private = None
            _settled(api, sandbox_id)
        if private is not None:
            return private
        with docker_errors():
            attached = api.attach_socket(
                sandbox_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
        raw = getattr(attached, "_sock", attached)
        if not isinstance(raw, socket.socket):
            msg = "the sandbox channel needs a unix or tcp connection to the Docker engine"
            raise SandboxUnavailable(msg)
        transport = DockerAttachTransport(raw, keep=attached)
        return pinged_channel(transport, sandbox_id, stall_seconds)

    def _exec_channel(sandbox_id: str) -> AgentChannel | None:
        with docker_errors():
            created = api.exec_create(
                sandbox_id, [AGENT, "--channel"], stdin=True, stdout=True, stderr=True, tty=False
            )
            started = api.exec_start(created["Id"], socket=True, tty=False)
        raw = getattr(started, "_sock", started)
        if not isinstance(raw, socket.socket):
            return None
        try:
            transport = DockerAttachTransport(raw, keep=started)
            return pinged_channel(transport, sandbox_id, stall_seconds, private=True)
        except SandboxUnavailable:  # no answer through the relay: the shared attach
            log.debug("sandbox %s: no channel of its own; attaching", sandbox_id)
            return None

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
