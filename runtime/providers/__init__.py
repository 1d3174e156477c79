"""Sandbox providers, chosen by ``SIESTA_PROVIDER__TYPE`` and imported lazily."""

from __future__ import annotations

from pathlib import Path

from runtime.providers.base import SandboxProvider
from runtime.providers.settings import (
    FakeProviderSettings,
    KubernetesProviderSettings,
    ProviderSettings,
    SandboxSettings,
)


def build_provider(
    provider: ProviderSettings,
    sandbox: SandboxSettings,
    *,
    deployment_id: str,
    data_dir: Path,
    resume_timeout_seconds: float,
    network: str | None = None,
    trust_pem: str | None = None,
) -> SandboxProvider:
    """The configured provider; what it creates is labelled with ``deployment_id``.
    ``network``: the Docker network sandboxes join (the egress network); ``trust_pem``:
    an authority sandboxes trust from their start (the egress proxy's, for secrets)."""
    if isinstance(provider, FakeProviderSettings):
        from runtime.providers.fake import FakeProvider

        return FakeProvider(data_dir / "fake-sandboxes")
    if isinstance(provider, KubernetesProviderSettings):
        from runtime.providers.kubernetes.provider import KubernetesProvider

        return KubernetesProvider(
            sandbox,
            provider,
            deployment_id=deployment_id,
            resume_timeout_seconds=resume_timeout_seconds,
            trust_pem=trust_pem,
        )
    from runtime.providers.docker.disks import LoopDisks
    from runtime.providers.docker.provider import DockerProvider

    disks = LoopDisks(sandbox.disk_dir / deployment_id)
    return DockerProvider(
        sandbox,
        deployment_id=deployment_id,
        base_url=provider.base_url,
        network=network,
        disks=disks,
        trust_pem=trust_pem,
    )
