"""The objects a Kubernetes sandbox is made of (its pod and its workspace claim), and
reading back what they say.

The claim is the sandbox's durable half: it carries the labels, the image and, while
no pod runs, which suspension it is in.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, TypeVar

from kubernetes.client import V1ObjectMeta, V1PersistentVolumeClaim, V1Pod

from runtime.core.errors import ProviderUnavailable, ProvisioningFailed
from runtime.providers.base import (
    DEPLOYMENT_LABEL,
    PACKAGE_INSTALL_CAPABILITIES,
    STOP_GRACE_SECONDS,
    WORKSPACE,
)
from runtime.providers.settings import KubernetesProviderSettings, SandboxSettings

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
SETUID_ANNOTATION = "siesta.io/allow-setuid"
"""On the workspace claim, "true": the image's pods allow privilege escalation (sudo)."""
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

Body = dict[str, Any]


class SandboxObjects:
    """Pods and claims of this deployment's sandboxes, as sent to the API server."""

    def __init__(
        self,
        sandbox: SandboxSettings,
        settings: KubernetesProviderSettings,
        deployment_id: str,
        trust_pem: str | None = None,
    ) -> None:
        """``trust_pem``: an authority the agent adds to the trust store at start."""
        self._sandbox = sandbox
        self._settings = settings
        self._deployment_id = deployment_id
        self._trust_pem = trust_pem

    def metadata(self, spec_labels: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
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

    def selector(self) -> str:
        """What every object of this deployment carries, as a label selector."""
        required = {**self._sandbox.extra_labels, DEPLOYMENT_LABEL: self._deployment_id}
        return ",".join(f"{k}={v}" for k, v in sorted(required.items()))

    def claim(
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

    def pod(
        self,
        name: str,
        image: str,
        labels: dict[str, str],
        annotations: dict[str, str],
        allow_setuid: bool = False,
    ) -> V1Pod:
        s, k = self._sandbox, self._settings
        limits = {"memory": f"{s.memory_limit_mb}Mi", "cpu": f"{round(s.cpu_limit * 1000)}m"}
        security: Body = {
            "allowPrivilegeEscalation": allow_setuid,
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
        if self._trust_pem:
            container["env"] = [{"name": "SIESTA_EGRESS_CA", "value": self._trust_pem}]
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


_T = TypeVar("_T")


def _required(model: _T | None) -> _T:
    """A model built from our own complete dict (the client's ``from_dict`` is Optional)."""
    if model is None:
        msg = "could not build a Kubernetes object"
        raise ProvisioningFailed(msg)
    return model


# -- reading them back -----------------------------------------------------------------


def meta(obj: V1Pod | V1PersistentVolumeClaim) -> V1ObjectMeta:
    if obj.metadata is None:
        msg = "the Kubernetes API sent an object without metadata"
        raise ProviderUnavailable(msg)
    return obj.metadata


def name_of(obj: V1Pod | V1PersistentVolumeClaim) -> str:
    return meta(obj).name or ""


def going(obj: V1Pod | V1PersistentVolumeClaim) -> bool:
    """Being deleted (it stays visible until its finalizers and grace period end)."""
    return meta(obj).deletion_timestamp is not None


def labels_of(obj: V1Pod | V1PersistentVolumeClaim) -> dict[str, str]:
    """What the service set at creation: labels, and the values kept as annotations."""
    m = meta(obj)
    labels = {k: v for k, v in (m.labels or {}).items() if k not in COMPONENT_LABELS}
    kept = {k: v for k, v in (m.annotations or {}).items() if "/" not in k}
    return {**labels, **kept}


def created_at(obj: V1Pod | V1PersistentVolumeClaim) -> float:
    created = meta(obj).creation_timestamp
    return created.timestamp() if isinstance(created, datetime) else 0.0
