"""A frame client for the agent's channels in Docker, for the protocol 3 tests.

Channel 0 is the engine's attach to the agent's stdin/stdout; a socket channel is
``docker exec -i <c> siesta-agent --channel``. Both arrive as the engine's
multiplexed stream (8-byte headers, ``Tty`` off), which ``Channel`` takes apart.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from typing import Any

import docker

from runtime.providers.agent.protocol import (
    AGENT_FRAMES_V3,
    Frame,
    FrameReader,
    FrameType,
    encode,
)
from tests.helpers import TEST_RUN_ID, TEST_RUN_LABEL

AGENT = "/usr/local/lib/siesta/siesta-agent"
OPENED: list[Channel] = []


class Channel:
    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.sock: socket.socket = stream._sock
        self._raw = bytearray()
        self._reader = FrameReader(AGENT_FRAMES_V3)
        self.pending: list[Frame] = []
        self.ended = False

    def send(self, frame_type: FrameType, request_id: int, payload: bytes = b"") -> None:
        self.sock.sendall(encode(frame_type, request_id, payload))

    def _read(self, timeout: float) -> None:
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(1 << 20)
        except (TimeoutError, BlockingIOError):
            return
        if not data:
            self.ended = True
            return
        self._raw += data
        pos = 0
        while len(self._raw) - pos >= 8:
            kind, size = self._raw[pos], struct.unpack_from(">I", self._raw, pos + 4)[0]
            if len(self._raw) - pos < 8 + size:
                break
            if kind == 1:
                self.pending.extend(self._reader.feed(bytes(self._raw[pos + 8 : pos + 8 + size])))
            pos += 8 + size
        del self._raw[:pos]

    def take(self, frame_type: FrameType, request_id: int, timeout: float = 10) -> Frame:
        deadline = time.monotonic() + timeout
        while True:
            for frame in self.pending:
                if frame.type is frame_type and frame.id == request_id:
                    self.pending.remove(frame)
                    return frame
            left = deadline - time.monotonic()
            if left <= 0 or self.ended:
                msg = f"no {frame_type.name} for {request_id:x}; pending: {self.pending[:5]}"
                raise AssertionError(msg)
            self._read(left)

    def quiet(self, seconds: float = 0.3) -> list[Frame]:
        """What arrives within ``seconds`` (and was waiting)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not self.ended:
            self._read(left)
        frames, self.pending = self.pending, []
        return frames

    def close(self) -> None:
        # docker-py keeps the HTTP response of the hijacked connection on the stream;
        # closed first (while its socket is open), nothing of it is left to collect.
        response = getattr(self._stream, "_response", None)
        if response is not None:
            with contextlib.suppress(OSError, ValueError):
                response.close()
        self.sock.close()
        self._stream.close()


def start_container(
    client: docker.DockerClient, image: str, runtime: str | None = None
) -> tuple[str, Channel]:
    """A container as the provider makes one (stdin open, no tty) and its channel 0."""
    api = client.api
    config = api.create_container_config(
        image,
        None,  # type: ignore[arg-type]
        labels={TEST_RUN_LABEL: TEST_RUN_ID},
        stdin_open=True,
        tty=False,
        host_config=api.create_host_config(runtime=runtime, cap_drop=["ALL"]),
    )
    config["StdinOnce"] = False
    container = api.create_container_from_config(config, None)["Id"]  # type: ignore[no-untyped-call]
    stream = api.attach_socket(container, params={"stdin": 1, "stdout": 1, "stream": 1})
    api.start(container)
    channel = Channel(stream)
    OPENED.append(channel)  # closed with the others (``close_all``)
    channel.send(FrameType.PING, 1)
    channel.take(FrameType.PONG, 1, timeout=30)
    return container, channel


def open_channel(client: docker.DockerClient, container: str, *command: str) -> Channel:
    """A socket channel through the relay (``command``: another way to start it)."""
    api = client.api
    exec_id = api.exec_create(container, list(command) or [AGENT, "--channel"], stdin=True)
    channel = Channel(api.exec_start(exec_id, socket=True))  # type: ignore[call-overload]
    OPENED.append(channel)
    return channel


def close_all() -> None:
    """Closes every channel ``open_channel`` and ``start_container`` made (a test's teardown)."""
    while OPENED:
        OPENED.pop().close()
