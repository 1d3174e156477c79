"""The lifecycle of Kubernetes sandboxes, through the official ``kubernetes`` client.

One sandbox is one pod named ``siesta-<session id>`` (a single container from
the catalog image, its agent as PID 1) and a PersistentVolumeClaim of the same
name mounted at ``/mnt/work`` (``objects.py``). The claim is the sandbox's durable
half: it carries the labels, the image and, while no pod runs, which suspension
it is in.

Kubernetes cannot freeze a pod, so both suspensions (``pause``, ``stop``) delete
the pod and keep the claim; resuming makes the pod again on the same claim. The
workspace survives; processes and changes outside ``/mnt/work`` do not.

Waits (a pod starting, a pod going away) watch the pod rather than poll it
(``pods.py``). This side opens one channel to each sandbox's agent (an exec of
the agent's relay, else the attach: ``channels.py``) and drops it when the pod
goes; what goes over it is the other seam (``AgentInside``). Every call is in the
provider's namespace and uses exactly ``provider.RBAC_RULES``.
"""

from __future__ import annotations

import time

import kubernetes.client
from kubernetes.client import V1PersistentVolumeClaim, V1Pod
from kubernetes.client.exceptions import ApiException

from runtime.core.errors import (
    MetricsNotSupported,
    ProvisioningTimeout,
    SandboxUnavailable,
    SnapshotsNotSupported,
)
from runtime.providers.agent.channels import AgentChannels
from runtime.providers.base import (
    STOP_GRACE_SECONDS,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
    SandboxUsage,
    SnapshotArtifacts,
    SnapshotLeftover,
    WorkspaceInfo,
)
from runtime.providers.kubernetes.channels import PodChannels
from runtime.providers.kubernetes.client import client_configuration
from runtime.providers.kubernetes.errors import (
    kubernetes_errors,
    provisioning_errors,
    unless_missing,
)
from runtime.providers.kubernetes.objects import (
    IMAGE_ANNOTATION,
    SETUID_ANNOTATION,
    SUSPENDED_ANNOTATION,
    SandboxObjects,
    created_at,
    going,
    labels_of,
    meta,
    name_of,
)
from runtime.providers.kubernetes.pods import (
    ENDED_PHASES,
    PodWatch,
    gone_or_running,
    resume_timeout,
    running_or_failed,
)
from runtime.providers.settings import KubernetesProviderSettings, SandboxSettings

_TIERS = {"paused": SandboxState.PAUSED, "stopped": SandboxState.STOPPED}


class KubernetesLifecycle:
    """The lifecycle of Kubernetes sandboxes (``SandboxLifecycle``)."""

    def __init__(
        self,
        sandbox: SandboxSettings,
        settings: KubernetesProviderSettings,
        *,
        deployment_id: str,
        resume_timeout_seconds: float,
        trust_pem: str | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._objects = SandboxObjects(sandbox, settings, deployment_id, trust_pem)
        self._resume_timeout = resume_timeout_seconds
        self._namespace = settings.namespace
        self._timeout = settings.request_timeout_seconds
        configuration = client_configuration(settings)
        self._core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
        self._version = kubernetes.client.VersionApi(self._core.api_client)
        self._pods = PodWatch(self._core, self._namespace, self._timeout)
        self._opener = PodChannels(
            configuration,
            self._namespace,
            self._pods,
            resume_timeout_seconds,
            sandbox.channel_stall_seconds,
        )
        self.channels = AgentChannels(self._opener)
        """The open agent channels of this instance, one per sandbox (``AgentInside``)."""

    def ping(self) -> None:
        with kubernetes_errors():
            self._version.get_code(_request_timeout=self._timeout)

    def prepare_ahead(self) -> None:
        """Nothing to make ahead."""

    def close(self) -> None:
        self.channels.close()
        self._core.api_client.close()
        self._opener.close()

    def _drop_channel(self, name: str) -> None:
        """The pod goes or is replaced: its channel ends, and what it served is forgotten."""
        self.channels.drop(name)
        self._opener.forget(name)

    def sandbox_id_for(self, session_id: str) -> str:
        return f"siesta-{session_id}"

    # -- creating and resuming -------------------------------------------------------

    def create(self, spec: SandboxSpec) -> str:
        name = self.sandbox_id_for(spec.session_id)
        labels, annotations = self._objects.metadata(spec.labels)
        claim = self._objects.claim(name, labels, {**annotations, **_image_annotations(spec)})
        try:
            with kubernetes_errors(), provisioning_errors():
                self._core.create_namespaced_persistent_volume_claim(
                    self._namespace, claim, _request_timeout=self._timeout
                )
                self._core.create_namespaced_pod(
                    self._namespace,
                    self._objects.pod(name, spec.image, labels, annotations, spec.allow_setuid),
                    _request_timeout=self._timeout,
                )
            limit = self._sandbox.provision_timeout_seconds
            if not self._pods.until(name, limit, running_or_failed(spec.image)):
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
        self._drop_channel(name)
        self._delete_pod(name, 0)
        patch = {"metadata": {"annotations": _image_annotations(spec)}}
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
        return claim is not None and not going(claim)

    def _resume(self, name: str) -> None:
        """The pod again, on the sandbox's claim (once its old pod has gone)."""
        limit = self._resume_timeout
        deadline = time.monotonic() + limit
        self._drop_channel(name)
        claim = self._read_claim(name)
        if claim is None:
            msg = f"the sandbox {name} has no workspace claim any more; try again"
            raise SandboxUnavailable(msg)
        claimed = meta(claim).annotations or {}
        image = claimed.get(IMAGE_ANNOTATION)
        allow_setuid = claimed.get(SETUID_ANNOTATION) == "true"
        if not image:
            msg = f"the workspace claim of {name} does not name its image"
            raise SandboxUnavailable(msg)
        self._clear_ended_pod(name)
        if not self._pods.until(name, limit, gone_or_running):
            raise resume_timeout(limit)
        labels, annotations = self._objects.metadata(labels_of(claim))  # as at creation
        with kubernetes_errors():
            try:
                self._core.create_namespaced_pod(
                    self._namespace,
                    self._objects.pod(name, image, labels, annotations, allow_setuid),
                    _request_timeout=self._timeout,
                )
            except ApiException as exc:
                if exc.status != 409:  # 409: it runs already (another instance resumed it)
                    raise
        if not self._pods.until(
            name, max(0.0, deadline - time.monotonic()), running_or_failed(image)
        ):
            raise resume_timeout(limit)
        self._mark_suspended(name, None)

    def _clear_ended_pod(self, name: str) -> None:
        """A pod that ended or was lost with its node (``Failed``, ``Unknown``) never goes
        on its own: it is deleted at once, so a new one can take the claim."""
        pod = self._read_pod(name)
        phase = pod.status.phase if pod is not None and pod.status is not None else None
        if phase in ENDED_PHASES:
            self._delete_pod(name, 0)

    # -- suspending and removing -----------------------------------------------------

    def usage(self, sandbox_id: str) -> SandboxUsage:
        """The cluster's metrics API is not wired to this provider: refused, not faked."""
        msg = f"this deployment's provider (kubernetes) cannot read {sandbox_id}'s usage"
        raise MetricsNotSupported(msg)

    def pause(self, sandbox_id: str) -> None:
        """There is no freezing a pod: the pod goes, the claim stays (``paused``)."""
        self._suspend(sandbox_id, "paused")

    def stop(self, sandbox_id: str) -> None:
        self._suspend(sandbox_id, "stopped")

    def _suspend(self, name: str, tier: str) -> None:
        self._drop_channel(name)
        self._mark_suspended(name, tier)
        self._delete_pod(name, STOP_GRACE_SECONDS)

    def destroy(self, sandbox_id: str) -> None:
        self._drop_channel(sandbox_id)
        self._delete_pod(sandbox_id, 0)
        with kubernetes_errors(), unless_missing():
            self._core.delete_namespaced_persistent_volume_claim(
                sandbox_id, self._namespace, _request_timeout=self._timeout
            )

    def _delete_pod(self, name: str, grace_seconds: int) -> None:
        with kubernetes_errors(), unless_missing():
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
        if pod is not None and meta(pod).deletion_timestamp is None:
            return self._pod_info(pod)
        claim = self._read_claim(sandbox_id)
        if claim is None or meta(claim).deletion_timestamp is not None:
            return SandboxInfo(sandbox_id, SandboxState.MISSING)
        return self._claim_info(claim)

    def known_running(self, sandbox_id: str) -> bool:
        return self.channels.existing(sandbox_id) is not None

    def list_sandboxes(self) -> list[SandboxInfo]:
        """Running pods, and the claims of suspended sandboxes (they have no pod)."""
        selector = self._objects.selector()
        with kubernetes_errors():
            pods = self._core.list_namespaced_pod(
                self._namespace, label_selector=selector, _request_timeout=self._timeout
            ).items
            claims = self._core.list_namespaced_persistent_volume_claim(
                self._namespace, label_selector=selector, _request_timeout=self._timeout
            ).items
        found = {
            info.sandbox_id: info
            for info in (self._pod_info(pod) for pod in pods if not going(pod))
        }
        for claim in claims:
            if name_of(claim) not in found and not going(claim):
                found[name_of(claim)] = self._claim_info(claim)
        return sorted(found.values(), key=lambda info: info.sandbox_id)

    def list_workspaces(self) -> list[WorkspaceInfo]:
        with kubernetes_errors():
            claims = self._core.list_namespaced_persistent_volume_claim(
                self._namespace,
                label_selector=self._objects.selector(),
                _request_timeout=self._timeout,
            ).items
        # A claim being deleted waits only for its pod to go (pvc-protection): it is
        # no workspace any more, and listing it would make reconciliation delete it again.
        return [
            WorkspaceInfo(name_of(claim), labels_of(claim), created_at(claim))
            for claim in claims
            if claim.metadata is None or claim.metadata.deletion_timestamp is None
        ]

    def memory_snapshot_refusal(self) -> str | None:
        return _no_snapshots().message

    def snapshot(self, sandbox_id: str, snapshot_id: str) -> SnapshotArtifacts:
        raise _no_snapshots()

    def create_from_snapshot(
        self, spec: SandboxSpec, artifacts: SnapshotArtifacts, *, consume: bool = False
    ) -> str:
        raise _no_snapshots()

    def delete_snapshot(self, snapshot_id: str) -> bool:
        """Nothing was ever made here."""
        return True

    def list_snapshot_leftovers(self) -> list[SnapshotLeftover]:
        return []

    def _pod_info(self, pod: V1Pod) -> SandboxInfo:
        phase = pod.status.phase if pod.status else None
        state = (
            SandboxState.RUNNING
            if phase in (None, "Pending", "Running")
            else (SandboxState.STOPPED)
        )
        return SandboxInfo(name_of(pod), state, labels_of(pod), created_at(pod))

    def _claim_info(self, claim: V1PersistentVolumeClaim) -> SandboxInfo:
        """A claim without a pod: suspended (or its pod was lost: stopped)."""
        tier = (meta(claim).annotations or {}).get(SUSPENDED_ANNOTATION) or "stopped"
        state = _TIERS.get(tier, SandboxState.STOPPED)
        return SandboxInfo(name_of(claim), state, labels_of(claim), created_at(claim))

    def _read_pod(self, name: str) -> V1Pod | None:
        """The pod, or ``None`` when there is none."""
        with kubernetes_errors(), unless_missing():
            return self._core.read_namespaced_pod(
                name, self._namespace, _request_timeout=self._timeout
            )
        return None

    def _read_claim(self, name: str) -> V1PersistentVolumeClaim | None:
        """The workspace claim, or ``None`` when there is none."""
        with kubernetes_errors(), unless_missing():
            return self._core.read_namespaced_persistent_volume_claim(
                name, self._namespace, _request_timeout=self._timeout
            )
        return None


def _image_annotations(spec: SandboxSpec) -> dict[str, str]:
    """What a claim says of the image its pods run (a resume makes the pod from it)."""
    return {IMAGE_ANNOTATION: spec.image, SETUID_ANNOTATION: str(spec.allow_setuid).lower()}


def _no_snapshots() -> SnapshotsNotSupported:
    # A pod's root file system has no engine commit here, and copying a claim needs
    # CSI volume snapshots, which clusters offer unevenly: not offered (yet).
    msg = "the Kubernetes provider does not snapshot or fork sandboxes (Docker does)"
    return SnapshotsNotSupported(msg)
