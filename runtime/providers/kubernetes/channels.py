"""How the Kubernetes provider opens a channel to a sandbox's agent, once the pod runs.

First a private one (protocol 3): an exec of the agent's relay, ``siesta-agent
--channel``, whose stdin and stdout are this instance's own connection to the agent.
Where that exec cannot serve, the attach to the agent's stdin and stdout (shared with
every instance): an old agent (protocol 2) exits at once, and a Role without
``pods/exec`` is refused (403). (gVisor's agent lets a relay in by the credentials of
its first byte, as its kernel does not name a socket's peer.)
Both go over the ``channel.k8s.io`` websocket protocol, and both are pinged.
Which one a pod serves is remembered per pod (by uid, so a new pod is asked again).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes.client
from kubernetes.client import V1Pod
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream
from websocket import ABNF, WebSocketException

from runtime.core.errors import SandboxUnavailable
from runtime.providers.agent.channel import AgentChannel, ChannelClosed
from runtime.providers.agent.channels import pinged_channel
from runtime.providers.kubernetes.errors import explain
from runtime.providers.kubernetes.objects import CONTAINER, meta
from runtime.providers.kubernetes.pods import PodWatch, present_and_running, resume_timeout

log = logging.getLogger(__name__)

RELAY = ["/usr/local/lib/siesta/siesta-agent", "--channel"]
"""The agent's relay (protocol 3): its stdin and stdout are a channel of their own."""


class PodChannels:
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
        # ``stream`` swaps its client's transport for the length of the call: streams
        # get a client of their own, one at a time, so no other request takes that path.
        self._core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
        self._lock = threading.Lock()
        self._namespace = namespace
        self._pods = pods
        self._resume_timeout = resume_timeout_seconds
        self._private: dict[str, tuple[str, bool]] = {}
        """Pod name: (its uid, whether it serves private channels), once asked."""

    def __call__(self, name: str) -> AgentChannel:
        """A channel to the pod's agent (waiting while the pod is still starting)."""
        uid = self._running_uid(name)
        known = self._private.get(name)
        if known != (uid, False):
            channel = self._exec(name)
            if known != (uid, channel is not None):
                self._private[name] = (uid, channel is not None)
                kind = "a private channel (exec)" if channel else "the shared attach"
                log.debug("sandbox %s (pod %s): %s", name, uid, kind)
            if channel is not None:
                return channel
        transport = self._stream(self._core.connect_get_namespaced_pod_attach, name)
        return pinged_channel(transport, name, self._stall_seconds)

    def forget(self, name: str) -> None:
        """The pod is gone (or going): whatever it served, a new one is asked again."""
        self._private.pop(name, None)

    def close(self) -> None:
        self._core.api_client.close()

    def _exec(self, name: str) -> AgentChannel | None:
        """A private channel, or ``None`` where the exec cannot serve one."""
        try:
            transport = self._stream(
                self._core.connect_get_namespaced_pod_exec, name, command=RELAY
            )
        except SandboxUnavailable as exc:
            if _handshake_status(exc.__cause__) == 403:  # the Role has no pods/exec
                return None
            raise
        try:
            return pinged_channel(transport, name, self._stall_seconds, private=True)
        except SandboxUnavailable as exc:
            if isinstance(exc.__cause__, ChannelClosed):  # it ended without a PONG
                return None
            raise  # no answer in time: a busy sandbox, not an old agent

    def _stream(self, connect: Callable[..., Any], name: str, **options: Any) -> AttachTransport:
        try:
            with self._lock:
                socket = stream(
                    connect,
                    name,
                    self._namespace,
                    container=CONTAINER,
                    stdin=True,
                    stdout=True,
                    stderr=True,
                    tty=False,
                    _preload_content=False,
                    binary=True,
                    **options,
                )
        except (ApiException, WebSocketException, OSError) as exc:
            reason = explain(exc) if isinstance(exc, ApiException) else str(exc)
            msg = f"could not open a channel to the sandbox's agent: {reason}; try again"
            raise SandboxUnavailable(msg) from exc
        return AttachTransport(socket)

    def _running_uid(self, name: str) -> str:
        running: list[V1Pod] = []

        def settled(pod: V1Pod | None) -> bool:
            if present_and_running(pod) and pod is not None:
                running.append(pod)
                return True
            return False

        if not self._pods.until(name, self._resume_timeout, settled):
            raise resume_timeout(self._resume_timeout)
        return meta(running[-1]).uid or ""


def _handshake_status(exc: BaseException | None) -> int:
    """The HTTP status that refused a websocket (the client keeps it only as the
    context of the ``ApiException(status=0)`` it raises)."""
    for refusal in (exc, exc.__context__ if exc is not None else None):
        status = getattr(refusal, "status", None) or getattr(refusal, "status_code", None)
        if status:
            return int(status)
    return 0


class AttachTransport:
    """A pod attach or exec over the ``channel.k8s.io`` websocket protocol: every
    message is a channel byte (0 stdin, 1 stdout, 2 stderr, 3 errors) and data."""

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
                log.debug("stream status: %s", data[1:].decode(errors="replace"))

    def close(self) -> None:
        with contextlib.suppress(WebSocketException, OSError):
            self._socket.abort()  # wakes the reader thread blocked in a receive
        with contextlib.suppress(WebSocketException, OSError):
            self._socket.shutdown()
