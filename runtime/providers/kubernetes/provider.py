"""Sandboxes as Kubernetes pods, through the official ``kubernetes`` client.

One sandbox is one pod named ``siesta-<session id>`` (a single container from
the catalog image, its agent as PID 1) and a PersistentVolumeClaim of the same
name mounted at ``/mnt/work``. The claim is the sandbox's durable half: it
carries the labels, the image and, while no pod runs, which suspension it is in.

Kubernetes cannot freeze a pod, so both suspensions (``pause``, ``stop``) delete
the pod and keep the claim; resuming makes the pod again on the same claim. The
workspace survives; processes and changes outside ``/mnt/work`` do not.

Commands and files go to the agent over one attach stream per sandbox (the
``channel.k8s.io`` websocket): the same protocol as on Docker (``agent_ops``).
Waits (a pod starting, a pod going away) watch the pod rather than poll it.
Every call is in the provider's namespace and uses exactly ``RBAC_RULES``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, TypeVar

import kubernetes.client
import kubernetes.config
import kubernetes.watch
from kubernetes.client import V1ObjectMeta, V1PersistentVolumeClaim, V1Pod
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream
from websocket import ABNF, WebSocketException

from runtime.core.errors import (
    ConfigurationError,
    ProviderUnavailable,
    ProvisioningFailed,
    ProvisioningTimeout,
    ResumeTimeout,
    SandboxUnavailable,
    SiestaError,
)
from runtime.providers.agent import ops as agent_ops
from runtime.providers.agent.channel import AgentChannel
from runtime.providers.agent.channels import AgentChannels, pinged_channel
from runtime.providers.base import (
    DEPLOYMENT_LABEL,
    PACKAGE_INSTALL_CAPABILITIES,
    STOP_GRACE_SECONDS,
    WORKSPACE,
    ByteSink,
    ExecRequest,
    ExecResult,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
    WorkspaceInfo,
)
from runtime.providers.kubernetes.errors import (
    explain,
    kubernetes_errors,
    provisioning_errors,
    startup_failure,
)
from runtime.providers.settings import KubernetesProviderSettings, SandboxSettings

log = logging.getLogger(__name__)

RBAC_RULES: dict[str, list[str]] = {
    "pods": ["create", "delete", "get", "list", "watch"],
    "pods/attach": ["create", "get"],
    "persistentvolumeclaims": ["create", "delete", "get", "list", "patch"],
}
"""Every verb this provider uses, by resource (core group, its namespace only).
k8s/base/role.yaml grants exactly these; a test holds the two together."""

CONTAINER = "sandbox"
COMPONENT_LABELS = {
    "app.kubernetes.io/component": "sandbox",
    "app.kubernetes.io/part-of": "siesta-runtime",
}
"""On every sandbox pod: the sandbox NetworkPolicy (k8s/base) selects by them."""
SUSPENDED_ANNOTATION = "siesta.io/suspended"
"""On the claim while no pod runs: ``paused`` or ``stopped`` (which tier the
session manager suspended it to)."""
IMAGE_ANNOTATION = "siesta.io/image"
"""On the claim: the image the pod is made from when the sandbox resumes."""
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_TIERS = {"paused": SandboxState.PAUSED, "stopped": SandboxState.STOPPED}
RELIST_PAUSE_SECONDS = 0.1
ENDED_PHASES = frozenset({"Failed", "Succeeded", "Unknown"})
"""Phases of a pod that will not run again (``Unknown``: its node stopped reporting)."""
_POOL_CONNECTIONS = 32
"""HTTP connections kept to the API server (many sandbox calls run at once)."""

Body = dict[str, Any]
PodSettled = Callable[["V1Pod | None"], bool]
"""Given the pod (``None``: it does not exist), whether the wait is over."""


class KubernetesProvider(agent_ops.HelperFiles):
    def __init__(
        self,
        sandbox: SandboxSettings,
        settings: KubernetesProviderSettings,
        *,
        deployment_id: str,
        resume_timeout_seconds: float,
    ) -> None:
        self._sandbox = sandbox
        self._settings = settings
        self._deployment_id = deployment_id
        self._resume_timeout = resume_timeout_seconds
        self._namespace = settings.namespace
        self._timeout = settings.request_timeout_seconds
        configuration = _configuration(settings)
        self._core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
        # ``stream`` swaps its client's transport for the length of the call: attaches
        # get a client of their own, one at a time, so no other request takes that path.
        self._attach_core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
        self._attach_lock = threading.Lock()
        self._version = kubernetes.client.VersionApi(self._core.api_client)
        self._channels = AgentChannels(self._open_channel)

    def ping(self) -> None:
        with kubernetes_errors():
            self._version.get_code(_request_timeout=self._timeout)

    def close(self) -> None:
        self._channels.close()
        self._core.api_client.close()
        self._attach_core.api_client.close()

    def sandbox_id_for(self, session_id: str) -> str:
        return f"siesta-{session_id}"

    # -- creating and resuming -------------------------------------------------------

    def create(self, spec: SandboxSpec) -> str:
        name = self.sandbox_id_for(spec.session_id)
        labels, annotations = self._metadata(spec.labels)
        claim = self._claim(name, labels, {**annotations, IMAGE_ANNOTATION: spec.image})
        try:
            with kubernetes_errors(), provisioning_errors():
                self._core.create_namespaced_persistent_volume_claim(
                    self._namespace, claim, _request_timeout=self._timeout
                )
                self._core.create_namespaced_pod(
                    self._namespace,
                    self._pod(name, spec.image, labels, annotations),
                    _request_timeout=self._timeout,
                )
            limit = self._sandbox.provision_timeout_seconds
            if not self._until(name, limit, _running_or_failed(spec.image)):
                msg = f"provisioning the sandbox took longer than the limit of {limit:g} seconds"
                raise ProvisioningTimeout(msg, limit=limit, unit="seconds")
        except BaseException:
            self.destroy(name)
            raise
        return name

    def unpause(self, sandbox_id: str) -> None:
        self._resume(sandbox_id)

    def start(self, sandbox_id: str) -> None:
        self._resume(sandbox_id)

    def recreate(self, spec: SandboxSpec) -> str:
        """A pod again on the claim, from ``spec.image``: a pod there is replaced."""
        name = self.sandbox_id_for(spec.session_id)
        self._channels.drop(name)
        self._delete_pod(name, 0)
        patch = {"metadata": {"annotations": {IMAGE_ANNOTATION: spec.image}}}
        with kubernetes_errors():
            self._core.patch_namespaced_persistent_volume_claim(
                name,
                self._namespace,
                patch,
                _content_type="application/merge-patch+json",
                _request_timeout=self._timeout,
            )
        self._resume(name)
        return name

    def workspace_exists(self, sandbox_id: str) -> bool:
        claim = self._read_claim(sandbox_id)
        return claim is not None and not _going(claim)

    def _resume(self, name: str) -> None:
        """The pod again, on the sandbox's claim (once its old pod has gone)."""
        limit = self._resume_timeout
        deadline = time.monotonic() + limit
        self._channels.drop(name)
        claim = self._read_claim(name)
        if claim is None:
            msg = f"the sandbox {name} has no workspace claim any more; try again"
            raise SandboxUnavailable(msg)
        meta = _meta(claim)
        image = (meta.annotations or {}).get(IMAGE_ANNOTATION)
        if not image:
            msg = f"the workspace claim of {name} does not name its image"
            raise SandboxUnavailable(msg)
        self._clear_ended_pod(name)
        if not self._until(name, limit, _gone_or_running):
            raise _resume_timeout(limit)
        labels, annotations = self._metadata(_labels(claim))  # as at creation
        with kubernetes_errors():
            try:
                self._core.create_namespaced_pod(
                    self._namespace,
                    self._pod(name, image, labels, annotations),
                    _request_timeout=self._timeout,
                )
            except ApiException as exc:
                if exc.status != 409:  # 409: it runs already (another instance resumed it)
                    raise
        if not self._until(name, max(0.0, deadline - time.monotonic()), _running_or_failed(image)):
            raise _resume_timeout(limit)
        self._mark_suspended(name, None)

    def _clear_ended_pod(self, name: str) -> None:
        """A pod that ended or was lost with its node (``Failed``, ``Unknown``) never goes
        on its own: it is deleted at once, so a new one can take the claim."""
        pod = self._read_pod(name)
        phase = pod.status.phase if pod is not None and pod.status is not None else None
        if phase in ENDED_PHASES:
            self._delete_pod(name, 0)

    # -- suspending and removing -----------------------------------------------------

    def pause(self, sandbox_id: str) -> None:
        """There is no freezing a pod: the pod goes, the claim stays (``paused``)."""
        self._suspend(sandbox_id, "paused")

    def stop(self, sandbox_id: str) -> None:
        self._suspend(sandbox_id, "stopped")

    def _suspend(self, name: str, tier: str) -> None:
        self._channels.drop(name)
        self._mark_suspended(name, tier)
        self._delete_pod(name, STOP_GRACE_SECONDS)

    def destroy(self, sandbox_id: str) -> None:
        self._channels.drop(sandbox_id)
        self._delete_pod(sandbox_id, 0)
        with kubernetes_errors(), _unless_missing():
            self._core.delete_namespaced_persistent_volume_claim(
                sandbox_id, self._namespace, _request_timeout=self._timeout
            )

    def _delete_pod(self, name: str, grace_seconds: int) -> None:
        with kubernetes_errors(), _unless_missing():
            self._core.delete_namespaced_pod(
                name,
                self._namespace,
                body=kubernetes.client.V1DeleteOptions(grace_period_seconds=grace_seconds),
                _request_timeout=self._timeout,
            )

    def _mark_suspended(self, name: str, tier: str | None) -> None:
        """Record the suspension on the claim (``None``: it runs)."""
        patch = {"metadata": {"annotations": {SUSPENDED_ANNOTATION: tier}}}
        with kubernetes_errors():
            self._core.patch_namespaced_persistent_volume_claim(
                name,
                self._namespace,
                patch,
                _content_type="application/merge-patch+json",  # null removes the key
                _request_timeout=self._timeout,
            )

    # -- state -----------------------------------------------------------------------

    def inspect(self, sandbox_id: str) -> SandboxInfo:
        pod = self._read_pod(sandbox_id)
        if pod is not None and _meta(pod).deletion_timestamp is None:
            return self._pod_info(pod)
        claim = self._read_claim(sandbox_id)
        if claim is None or _meta(claim).deletion_timestamp is not None:
            return SandboxInfo(sandbox_id, SandboxState.MISSING)
        return self._claim_info(claim)

    def known_running(self, sandbox_id: str) -> bool:
        return self._channels.existing(sandbox_id) is not None

    def list_sandboxes(self) -> list[SandboxInfo]:
        """Running pods, and the claims of suspended sandboxes (they have no pod)."""
        selector = self._selector()
        with kubernetes_errors():
            pods = self._core.list_namespaced_pod(
                self._namespace, label_selector=selector, _request_timeout=self._timeout
            ).items
            claims = self._core.list_namespaced_persistent_volume_claim(
                self._namespace, label_selector=selector, _request_timeout=self._timeout
            ).items
        found = {
            info.sandbox_id: info
            for info in (self._pod_info(pod) for pod in pods if not _going(pod))
        }
        for claim in claims:
            if _name(claim) not in found and not _going(claim):
                found[_name(claim)] = self._claim_info(claim)
        return sorted(found.values(), key=lambda info: info.sandbox_id)

    def list_workspaces(self) -> list[WorkspaceInfo]:
        with kubernetes_errors():
            claims = self._core.list_namespaced_persistent_volume_claim(
                self._namespace, label_selector=self._selector(), _request_timeout=self._timeout
            ).items
        # A claim being deleted waits only for its pod to go (pvc-protection): it is
        # no workspace any more, and listing it would make reconciliation delete it again.
        return [
            WorkspaceInfo(_name(claim), _labels(claim), _timestamp(claim))
            for claim in claims
            if claim.metadata is None or claim.metadata.deletion_timestamp is None
        ]

    def _pod_info(self, pod: V1Pod) -> SandboxInfo:
        phase = pod.status.phase if pod.status else None
        state = (
            SandboxState.RUNNING
            if phase in (None, "Pending", "Running")
            else (SandboxState.STOPPED)
        )
        return SandboxInfo(_name(pod), state, _labels(pod), _timestamp(pod))

    def _claim_info(self, claim: V1PersistentVolumeClaim) -> SandboxInfo:
        """A claim without a pod: suspended (or its pod was lost: stopped)."""
        tier = (_meta(claim).annotations or {}).get(SUSPENDED_ANNOTATION) or "stopped"
        state = _TIERS.get(tier, SandboxState.STOPPED)
        return SandboxInfo(_name(claim), state, _labels(claim), _timestamp(claim))

    def _read_pod(self, name: str) -> V1Pod | None:
        """The pod, or ``None`` when there is none."""
        with kubernetes_errors(), _unless_missing():
            return self._core.read_namespaced_pod(
                name, self._namespace, _request_timeout=self._timeout
            )
        return None

    def _read_claim(self, name: str) -> V1PersistentVolumeClaim | None:
        """The workspace claim, or ``None`` when there is none."""
        with kubernetes_errors(), _unless_missing():
            return self._core.read_namespaced_persistent_volume_claim(
                name, self._namespace, _request_timeout=self._timeout
            )
        return None

    def _until(self, name: str, limit: float, settled: PodSettled) -> bool:
        """Watch the pod until ``settled`` says so (list, then watch from the list's
        version, so nothing in between is missed); False when ``limit`` passes first.
        ``settled`` may raise to end the wait with an error."""
        deadline = time.monotonic() + limit
        field = f"metadata.name={name}"
        while True:
            with kubernetes_errors():
                listed = self._core.list_namespaced_pod(
                    self._namespace, field_selector=field, _request_timeout=self._timeout
                )
            if settled(listed.items[0] if listed.items else None):
                return True
            version: str | None = listed.metadata.resource_version if listed.metadata else None
            while version is not None and (left := deadline - time.monotonic()) > 0:
                done, version = self._watch(field, version, left, settled)
                if done:
                    return True
            if time.monotonic() >= deadline:
                return False
            # The server no longer has the version to watch from: list again.
            time.sleep(RELIST_PAUSE_SECONDS)

    def _watch(
        self, field: str, version: str, seconds: float, settled: PodSettled
    ) -> tuple[bool, str | None]:
        """One watch request from ``version``: whether ``settled`` said so, and the
        version to continue from (``None``: the server no longer has ``version``)."""
        watcher = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
        try:
            with kubernetes_errors():
                try:
                    for event in watcher.stream(  # type: ignore[no-untyped-call]
                        self._core.list_namespaced_pod,
                        self._namespace,
                        field_selector=field,
                        resource_version=version,
                        timeout_seconds=max(1, math.ceil(seconds)),
                        _request_timeout=seconds + self._timeout,
                    ):
                        if event["type"] == "ERROR":
                            return False, None
                        pod = event["object"]
                        version = _meta(pod).resource_version or version
                        if settled(None if event["type"] == "DELETED" else pod):
                            return True, version
                except ApiException as exc:
                    if exc.status == 410:
                        return False, None
                    raise
        finally:
            watcher.stop()  # type: ignore[no-untyped-call]
        return False, version

    # -- commands and files ----------------------------------------------------------

    def warm(self, sandbox_id: str) -> None:
        self._channels.get(sandbox_id)

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        return agent_ops.command(self._channel(sandbox_id), request)

    def collect(self, sandbox_id: str, request: ExecRequest) -> ExecResult | None:
        return agent_ops.collected(self._channel(sandbox_id), request)

    def cancel_exec(self, sandbox_id: str) -> None:
        channel = self._channels.existing(sandbox_id)
        if channel is not None:
            channel.cancel()

    def _io(self, sandbox_id: str) -> agent_ops.HelperIO:
        def run(
            argv: list[str], stdin_chunks: Iterable[bytes] | None, stdout_sink: ByteSink | None
        ) -> tuple[int, str]:
            return agent_ops.helper(self._channel(sandbox_id), argv, stdin_chunks, stdout_sink)

        return run

    def _channel(self, sandbox_id: str) -> AgentChannel:
        channel = self._channels.get(sandbox_id)
        if channel is None:  # every pod this provider makes runs the agent
            msg = f"the sandbox {sandbox_id} has no agent"
            raise SandboxUnavailable(msg)
        return channel

    def _open_channel(self, name: str) -> AgentChannel:
        """Attach to the pod's agent (waiting while the pod is still starting)."""
        if not self._until(name, self._resume_timeout, _present_and_running):
            raise _resume_timeout(self._resume_timeout)
        try:
            with self._attach_lock:
                socket = stream(
                    self._attach_core.connect_get_namespaced_pod_attach,
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
        return pinged_channel(AttachTransport(socket), name)

    # -- what is sent --------------------------------------------------------------

    def _metadata(self, spec_labels: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """Labels (for selecting) and annotations: a value that cannot be a label
        value (an org id with a colon, say) is kept as an annotation of the same key."""
        every = {
            **self._sandbox.extra_labels,
            **spec_labels,
            DEPLOYMENT_LABEL: self._deployment_id,
        }
        labels = {k: v for k, v in every.items() if len(v) <= 63 and _LABEL_VALUE.match(v)}
        annotations = {k: v for k, v in every.items() if k not in labels}
        return {**labels, **COMPONENT_LABELS}, annotations

    def _selector(self) -> str:
        required = {**self._sandbox.extra_labels, DEPLOYMENT_LABEL: self._deployment_id}
        return ",".join(f"{k}={v}" for k, v in sorted(required.items()))

    def _claim(
        self, name: str, labels: dict[str, str], annotations: dict[str, str]
    ) -> V1PersistentVolumeClaim:
        spec: Body = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": self._settings.workspace_size}},
        }
        if self._settings.storage_class:
            spec["storageClassName"] = self._settings.storage_class
        return _required(
            V1PersistentVolumeClaim.from_dict(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": name, "labels": labels, "annotations": annotations},
                    "spec": spec,
                }
            )
        )

    def _pod(
        self, name: str, image: str, labels: dict[str, str], annotations: dict[str, str]
    ) -> V1Pod:
        s, k = self._sandbox, self._settings
        limits = {"memory": f"{s.memory_limit_mb}Mi", "cpu": f"{round(s.cpu_limit * 1000)}m"}
        security: Body = {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"], "add": PACKAGE_INSTALL_CAPABILITIES},
        }
        if k.run_as_user is not None:
            security |= {"runAsUser": k.run_as_user, "runAsNonRoot": True}
        container: Body = {
            "name": CONTAINER,
            "image": image,
            "imagePullPolicy": k.image_pull_policy,
            # The agent's channel is its stdin, open for attaching again and again.
            "stdin": True,
            "stdinOnce": False,
            "tty": False,
            "workingDir": WORKSPACE,
            # Requests equal to limits: a sandbox is never the first evicted under pressure.
            "resources": {"limits": limits, "requests": limits},
            "securityContext": security,
            "volumeMounts": [{"name": "workspace", "mountPath": WORKSPACE}],
        }
        spec: Body = {
            "containers": [container],
            "volumes": [{"name": "workspace", "persistentVolumeClaim": {"claimName": name}}],
            "hostname": "sandbox",
            # The agent (PID 1) restarts with its workspace if it ever dies, as on Docker.
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": STOP_GRACE_SECONDS,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        }
        if k.runtime_class:
            spec["runtimeClassName"] = k.runtime_class
        if k.node_selector:
            spec["nodeSelector"] = k.node_selector
        return _required(
            V1Pod.from_dict(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "labels": labels, "annotations": annotations},
                    "spec": spec,
                }
            )
        )


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


@contextlib.contextmanager
def _unless_missing() -> Iterator[None]:
    """A 404 (the object is not there) is not an error here."""
    try:
        yield
    except ApiException as exc:
        if exc.status != 404:
            raise


def _configuration(settings: KubernetesProviderSettings) -> kubernetes.client.Configuration:
    configuration = kubernetes.client.Configuration()
    try:
        if settings.api_url:
            configuration.host = settings.api_url.rstrip("/")
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and settings.kubeconfig is None:
            kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        else:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(settings.kubeconfig) if settings.kubeconfig else None,
                context=settings.context,
                client_configuration=configuration,
            )
    except kubernetes.config.ConfigException as exc:
        msg = (
            f"no Kubernetes API to use: {exc} (set SIESTA_PROVIDER__KUBECONFIG, "
            "SIESTA_PROVIDER__API_URL, or run in a cluster)"
        )
        raise ConfigurationError(msg) from exc
    configuration.connection_pool_maxsize = _POOL_CONNECTIONS
    return configuration


_T = TypeVar("_T")


def _required(model: _T | None) -> _T:
    """A model built from our own complete dict (the client's ``from_dict`` is Optional)."""
    if model is None:
        msg = "could not build a Kubernetes object"
        raise ProvisioningFailed(msg)
    return model


def _meta(obj: V1Pod | V1PersistentVolumeClaim) -> V1ObjectMeta:
    if obj.metadata is None:
        msg = "the Kubernetes API sent an object without metadata"
        raise ProviderUnavailable(msg)
    return obj.metadata


def _name(obj: V1Pod | V1PersistentVolumeClaim) -> str:
    return _meta(obj).name or ""


def _going(obj: V1Pod | V1PersistentVolumeClaim) -> bool:
    """Being deleted (it stays visible until its finalizers and grace period end)."""
    return _meta(obj).deletion_timestamp is not None


def _labels(obj: V1Pod | V1PersistentVolumeClaim) -> dict[str, str]:
    """What the service set at creation: labels, and the values kept as annotations."""
    meta = _meta(obj)
    labels = {k: v for k, v in (meta.labels or {}).items() if k not in COMPONENT_LABELS}
    kept = {k: v for k, v in (meta.annotations or {}).items() if "/" not in k}
    return {**labels, **kept}


def _timestamp(obj: V1Pod | V1PersistentVolumeClaim) -> float:
    created = _meta(obj).creation_timestamp
    return created.timestamp() if isinstance(created, datetime) else 0.0


def _running(pod: V1Pod) -> bool:
    status = pod.status
    if status is None or _going(pod) or status.phase != "Running":
        return False
    statuses = status.container_statuses or []
    return any(s.state is not None and s.state.running is not None for s in statuses)


def _running_or_failed(image: str) -> PodSettled:
    """Settled when the pod runs; raises when it will not (an image that cannot be
    pulled, no room in the cluster, a container that cannot start)."""

    def settled(pod: V1Pod | None) -> bool:
        if pod is None or _going(pod):
            return False  # not made yet, or an old pod still going away
        if _running(pod):
            return True
        error = startup_failure(image, *_starting_state(pod))
        if error is not None:
            raise error
        return False

    return settled


def _present_and_running(pod: V1Pod | None) -> bool:
    if pod is None or _going(pod):
        msg = "the sandbox's pod is gone or going; try again"
        raise SandboxUnavailable(msg)
    if pod.status is not None and pod.status.phase in ("Failed", "Succeeded"):
        msg = f"the sandbox's pod has ended ({pod.status.phase}); try again"
        raise SandboxUnavailable(msg)
    return _running(pod)


def _gone_or_running(pod: V1Pod | None) -> bool:
    return pod is None or _running(pod)


def _starting_state(pod: V1Pod) -> tuple[str | None, str | None, tuple[str, str] | None]:
    status = pod.status
    if status is None:
        return None, None, None
    unschedulable = next(
        (
            c.message or c.reason
            for c in status.conditions or []
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        ),
        None,
    )
    waiting = next(
        (
            (s.state.waiting.reason or "", s.state.waiting.message or "")
            for s in status.container_statuses or []
            if s.state is not None and s.state.waiting is not None
        ),
        None,
    )
    return status.phase, unschedulable, waiting


def _resume_timeout(limit: float) -> SiestaError:
    msg = f"resuming the sandbox took longer than the limit of {limit:g} seconds"
    return ResumeTimeout(msg, limit=limit, unit="seconds")
