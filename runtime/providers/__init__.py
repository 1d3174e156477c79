"""Sandbox providers, chosen by ``SIESTA_PROVIDER__TYPE`` and imported lazily."""

from __future__ import annotations

from runtime.core.config import FakeProviderSettings, KubernetesProviderSettings, Settings
from runtime.providers.base import SandboxProvider


def build_provider(
    settings: Settings, deployment_id: str, network: str | None = None
) -> SandboxProvider:
    """The configured provider; what it creates is labelled with ``deployment_id``.
    ``network``: the Docker network sandboxes join (the egress network)."""
    provider = settings.provider
    if isinstance(provider, FakeProviderSettings):
        from runtime.providers.fake import FakeProvider

        return FakeProvider(settings.data_dir / "fake-sandboxes")
    if isinstance(provider, KubernetesProviderSettings):
        from runtime.providers.kubernetes.provider import KubernetesProvider

        return KubernetesProvider(
            settings.sandbox,
            provider,
            deployment_id=deployment_id,
            resume_timeout_seconds=settings.lifecycle.resume_timeout_seconds,
        )
    from runtime.providers.docker.disks import LoopDisks
    from runtime.providers.docker.provider import DockerProvider

    disks = LoopDisks(settings.sandbox.disk_dir / deployment_id)
    return DockerProvider(
        settings.sandbox,
        deployment_id=deployment_id,
        base_url=provider.base_url,
        network=network,
        disks=disks,
    )
