"""Sandboxes as Docker containers: the two seams put together.

``DockerLifecycle`` (``lifecycle.py``) makes, suspends and removes containers and
opens a channel to each one's agent; ``DockerInside`` (``inside.py``) runs commands
and file helpers over that channel, or as engine execs where there is no agent.
"""

from __future__ import annotations

import docker

from runtime.providers.base import SandboxProvider
from runtime.providers.docker.disks import LoopDisks
from runtime.providers.docker.engine_exec import EngineExec
from runtime.providers.docker.inside import DockerInside
from runtime.providers.docker.lifecycle import DockerLifecycle
from runtime.providers.settings import SandboxSettings


class DockerProvider(SandboxProvider):
    lifecycle: DockerLifecycle

    def __init__(
        self,
        settings: SandboxSettings,
        *,
        deployment_id: str,
        base_url: str | None = None,
        client: docker.DockerClient | None = None,
        network: str | None = None,
        disks: LoopDisks | None = None,
        trust_pem: str | None = None,
    ) -> None:
        lifecycle = DockerLifecycle(
            settings,
            deployment_id=deployment_id,
            base_url=base_url,
            client=client,
            network=network,
            disks=disks,
            trust_pem=trust_pem,
        )
        super().__init__(lifecycle, docker_inside(lifecycle))


def docker_inside(lifecycle: DockerLifecycle) -> DockerInside:
    """The inside of ``lifecycle``'s sandboxes: over its channels, its engine's exec."""
    return DockerInside(lifecycle.channels, EngineExec(lifecycle.api))
