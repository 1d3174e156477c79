"""How the Kubernetes provider opens a channel to a sandbox's agent: an attach to the
pod's container (the ``channel.k8s.io`` websocket), once the pod runs, and a ping."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import kubernetes.client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream
from websocket import ABNF, WebSocketException

from runtime.core.errors import SandboxUnavailable
from runtime.providers.agent.channel import AgentChannel
from runtime.providers.agent.channels import pinged_channel
from runtime.providers.kubernetes.errors import explain
from runtime.providers.kubernetes.objects import CONTAINER
from runtime.providers.kubernetes.pods import PodWatch, present_and_running, resume_timeout

log = logging.getLogger(__name__)


class PodAttach:
    """The channel opener (``AgentChannels``) of one namespace's sandbox pods."""

    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        namespace: str,
        pods: PodWatch,
        resume_timeout_seconds: float,
        stall_seconds: float | None = None,
    ) -> None:
        self._stall_seconds = stall_seconds
        # ``stream`` swaps its client's transport for the length of the call: attaches
        # get a client of their own, one at a time, so no other request takes that path.
        self._core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
        self._lock = threading.Lock()
        self._namespace = namespace
        self._pods = pods
        self._resume_timeout = resume_timeout_seconds

    def __call__(self, name: str) -> AgentChannel:
        """Attach to the pod's agent (waiting while the pod is still starting)."""
        if not self._pods.until(name, self._resume_timeout, present_and_running):
            raise resume_timeout(self._resume_timeout)
        try:
            with self._lock:
                socket = stream(
                    self._core.connect_get_namespaced_pod_attach,
                    name,
                    self._namespace,
                    container=CONTAINER,
                    stdin=True,
                    stdout=True,
                    stderr=True,
                    tty=False,
                    _preload_content=False,
                    binary=True,
                )
        except (ApiException, WebSocketException, OSError) as exc:
            reason = explain(exc) if isinstance(exc, ApiException) else str(exc)
            msg = f"could not attach to the sandbox's agent: {reason}; try again"
            raise SandboxUnavailable(msg) from exc
        return pinged_channel(AttachTransport(socket), name, self._stall_seconds)

    def close(self) -> None:
        self._core.api_client.close()


class AttachTransport:
    """A pod attach over the ``channel.k8s.io`` websocket protocol: every message
    is a channel byte (0 stdin, 1 stdout, 2 stderr, 3 errors) and data."""

    def __init__(self, client: Any) -> None:
        self._client = client  # kubernetes.stream.ws_client.WSClient
        self._socket = client.sock

    def send(self, data: bytes) -> None:
        try:
            self._socket.send(b"\x00" + data, opcode=ABNF.OPCODE_BINARY)
        except WebSocketException as exc:
            raise OSError(str(exc)) from exc

    def receive(self) -> Iterator[tuple[int, bytes]]:
        while True:
            try:
                opcode, frame = self._socket.recv_data_frame(True)
            except (WebSocketException, OSError):
                return
            if opcode == ABNF.OPCODE_CLOSE:
                return
            data = bytes(frame.data or b"")
            if opcode not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) or not data:
                continue
            if data[0] in (1, 2):
                yield data[0], data[1:]
            elif data[0] == 3:  # the API server's status as the stream ends
                log.debug("attach status: %s", data[1:].decode(errors="replace"))

    def close(self) -> None:
        with contextlib.suppress(WebSocketException, OSError):
            self._socket.abort()  # wakes the reader thread blocked in a receive
        with contextlib.suppress(WebSocketException, OSError):
            self._socket.shutdown()
