"""What a Docker sandbox's container is made of: limits, hardening, its agent's channel."""

from __future__ import annotations

from typing import Any

import docker
from docker.types import LogConfig

from runtime.providers.base import PACKAGE_INSTALL_CAPABILITIES, WORKSPACE
from runtime.providers.settings import SandboxSettings

# If the agent (PID 1) ever dies, the container starts again with its disk: the
# conversation keeps its files; its processes are gone, as after a reboot. The engine
# does not start sandboxes when it starts itself: the session manager starts each one
# on its conversation's next operation (a restart of the engine would otherwise start
# every suspended sandbox at once).
RESTART_RETRIES = 3
AGENT_DIR = "/usr/local/lib/siesta"
"""The agent and siesta-fs: read-only inside the sandbox, so that root there cannot
replace the program the next start of the container runs as the service's channel."""
TRUST_ENV = "SIESTA_EGRESS_CA"
"""The agent's variable for an authority to trust (PEM): public, and unset by the agent
once installed, so commands do not inherit it."""
ENGINE_READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
"""What the engine makes read-only by default; a list of our own replaces it."""


def container_config(
    api: docker.APIClient,
    settings: SandboxSettings,
    network: str,
    image: str,
    name: str,
    labels: dict[str, str],
    runtime: str | None = None,
    allow_setuid: bool = False,
    *,
    trust_pem: str | None = None,
) -> dict[str, Any]:
    """The engine's create request for the sandbox ``name`` (its workspace volume of the
    same name at ``/mnt/work``); ``runtime``: the OCI runtime (``None``: the engine's);
    ``allow_setuid``: without ``no-new-privileges``; ``trust_pem``: an authority the
    agent adds to the sandbox's trust store when it starts (``SIESTA_EGRESS_CA``)."""
    s = settings
    host_config = api.create_host_config(
        binds={name: {"bind": WORKSPACE, "mode": "rw"}},
        mem_limit=f"{s.memory_limit_mb}m",
        memswap_limit=f"{s.memory_limit_mb}m",
        nano_cpus=int(s.cpu_limit * 1e9),
        pids_limit=s.pids_limit,
        cap_drop=["ALL"],
        cap_add=PACKAGE_INSTALL_CAPABILITIES,
        security_opt=[] if allow_setuid else ["no-new-privileges"],
        network_mode=network,
        # The image's agent is PID 1 (it reaps orphans); Docker's --init would
        # put another init above it, out of the agent's reach.
        init=False,
        log_config=LogConfig(type=LogConfig.types.NONE),  # frames never reach logs
        restart_policy={"Name": "on-failure", "MaximumRetryCount": RESTART_RETRIES},
        runtime=runtime,
    )
    host_config["ReadonlyPaths"] = [*ENGINE_READONLY_PATHS, AGENT_DIR]
    config: dict[str, Any] = api.create_container_config(
        image,
        None,  # type: ignore[arg-type]  # no command: the image's entry point alone
        hostname="sandbox",
        labels=labels,
        working_dir=WORKSPACE,
        volumes=[WORKSPACE],
        host_config=host_config,
        stdin_open=True,  # the agent's channel: its stdin, open for attaching
        tty=False,
        environment={TRUST_ENV: trust_pem} if trust_pem else None,
    )
    # The SDK sets StdinOnce with stdin_open (like `docker run -i`): the first
    # client to leave would close the agent's stdin for good. It must not.
    config["StdinOnce"] = False
    return config
