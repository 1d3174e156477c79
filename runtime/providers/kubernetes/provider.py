"""Sandboxes as Kubernetes pods: the two seams put together.

``KubernetesLifecycle`` (``lifecycle.py``) makes, suspends and removes pods and their
workspace claims and opens a channel to each pod's agent (``channels.py``); what runs
inside is ``AgentInside``, the same over every agent channel.
"""

from __future__ import annotations

from runtime.providers.agent.inside import AgentInside
from runtime.providers.base import SandboxProvider
from runtime.providers.kubernetes.lifecycle import KubernetesLifecycle
from runtime.providers.settings import KubernetesProviderSettings, SandboxSettings

RBAC_RULES: dict[str, list[str]] = {
    "pods": ["create", "delete", "get", "list", "watch"],
    "pods/attach": ["create", "get"],
    "pods/exec": ["create", "get"],
    "persistentvolumeclaims": ["create", "delete", "get", "list", "patch"],
}
"""Every verb this provider uses, by resource (core group, its namespace only).
k8s/base/role.yaml grants exactly these; a test holds the two together."""


class KubernetesProvider(SandboxProvider):
    lifecycle: KubernetesLifecycle

    def __init__(
        self,
        sandbox: SandboxSettings,
        settings: KubernetesProviderSettings,
        *,
        deployment_id: str,
        resume_timeout_seconds: float,
        trust_pem: str | None = None,
    ) -> None:
        lifecycle = KubernetesLifecycle(
            sandbox,
            settings,
            deployment_id=deployment_id,
            resume_timeout_seconds=resume_timeout_seconds,
            trust_pem=trust_pem,
        )
        super().__init__(lifecycle, AgentInside(lifecycle.channels))
