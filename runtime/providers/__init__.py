"""Sandbox providers, chosen by ``SIESTA_PROVIDER__TYPE`` and imported lazily."""

from __future__ import annotations

from runtime.config import Settings
from runtime.providers.base import SandboxProvider


def build_provider(settings: Settings) -> SandboxProvider:
    if settings.provider.type == "fake":
        from runtime.providers.fake import FakeProvider

        return FakeProvider(settings.data_dir / "fake-sandboxes")
    from runtime.providers.docker import DockerProvider

    return DockerProvider(settings.sandbox, base_url=settings.provider.docker_base_url)
