"""Sandbox providers, chosen by ``SIESTA_PROVIDER__TYPE`` and imported lazily."""

from __future__ import annotations

from runtime.config import FakeProviderSettings, Settings
from runtime.providers.base import SandboxProvider


def build_provider(settings: Settings, deployment_id: str) -> SandboxProvider:
    """The configured provider; what it creates is labelled with ``deployment_id``."""
    if isinstance(settings.provider, FakeProviderSettings):
        from runtime.providers.fake import FakeProvider

        return FakeProvider(settings.data_dir / "fake-sandboxes")
    from runtime.providers.docker import DockerProvider

    return DockerProvider(
        settings.sandbox, deployment_id=deployment_id, base_url=settings.provider.base_url
    )
