"""What a server in a sandbox sends through a port is bounded in bytes: before the
connection says it opened, and per WebSocket message; each cut names its limit."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Request

from runtime.sandbox.ports.connection import CONNECTED, PortConnection
from runtime.sandbox.ports.errors import PortConnectionLost, PortMessageTooLarge
from runtime.sandbox.ports.settings import PortsSettings
from runtime.sandbox.ports.websocket import Closed, ServerSocket
from runtime.sandbox.processes import Output, Reader
from runtime.seams.providers import RunningProcess

KIB = 1024


class Killable:
    killed = False

    def kill(self) -> None:
        self.killed = True


def test_a_port_that_speaks_too_much_before_it_opens_is_cut_naming_the_limit() -> None:
    settings = PortsSettings(early_buffer_bytes=64 * KIB)

    async def scenario() -> PortConnectionLost:
        reader = Reader(asyncio.get_running_loop(), settings.connection_buffer_bytes)
        handle = Killable()
        connection = PortConnection(
            8000, cast(RunningProcess, handle), reader, settings, lambda: None, lambda: None
        )
        for _ in range(10):  # 320 KiB, and "connected" never comes
            reader.push(Output("stdout", b"x" * 32 * KIB))
        with pytest.raises(PortConnectionLost) as caught:
            await connection.opened()
        await connection.aclose()
        assert handle.killed
        return caught.value

    error = asyncio.run(scenario())
    assert error.fields["limit"] == 64 * KIB
    assert "SIESTA_PORTS__EARLY_BUFFER_BYTES" in error.message


def test_a_server_that_speaks_first_within_the_limit_is_heard() -> None:
    settings = PortsSettings(early_buffer_bytes=64 * KIB)

    async def scenario() -> bytes:
        reader = Reader(asyncio.get_running_loop(), settings.connection_buffer_bytes)
        connection = PortConnection(
            8000, cast(RunningProcess, Killable()), reader, settings, lambda: None, lambda: None
        )
        reader.push(Output("stdout", b"220 hello\r\n"))
        reader.push(Output("stderr", CONNECTED + b"\n"))
        await connection.opened()
        return await connection.receive()

    assert asyncio.run(scenario()) == b"220 hello\r\n"


class WebSocketServer:
    """A ``PortConnection`` whose far end is a wsproto server that accepts the upgrade,
    then sends one message in ``fragments`` pieces of 64 KiB."""

    port = 8000

    def __init__(self, fragments: int) -> None:
        self._ws = WSConnection(ConnectionType.SERVER)
        self._out: list[bytes] = []
        self._fragments = fragments

    async def send(self, data: bytes) -> None:
        self._ws.receive_data(data)
        for event in self._ws.events():
            if isinstance(event, Request):
                self._out.append(self._ws.send(AcceptConnection()))
                for i in range(self._fragments):
                    last = i == self._fragments - 1
                    piece = BytesMessage(data=b"y" * 64 * KIB, message_finished=last)
                    self._out.append(self._ws.send(piece))

    async def receive(self) -> bytes:
        return self._out.pop(0) if self._out else b""

    async def send_eof(self) -> None: ...


def _relay_one(fragments: int, limit: int) -> bytes | str:
    async def scenario() -> bytes | str:
        server = ServerSocket(cast(PortConnection, WebSocketServer(fragments)), limit)
        assert await server.upgrade("localhost:8000", "/", [], []) is None
        message = await server.receive()
        assert not isinstance(message, Closed)
        return message

    return asyncio.run(scenario())


def test_a_websocket_message_over_its_limit_closes_naming_the_limit() -> None:
    with pytest.raises(PortMessageTooLarge) as caught:
        _relay_one(fragments=8, limit=256 * KIB)  # 512 KiB
    assert caught.value.fields["limit"] == 256 * KIB
    assert "SIESTA_PORTS__MAX_WEBSOCKET_MESSAGE_BYTES" in caught.value.message


def test_a_websocket_message_within_its_limit_is_relayed_whole() -> None:
    assert _relay_one(fragments=4, limit=256 * KIB) == b"y" * 256 * KIB
