"""A Docker sandbox's usage, read from its host: its cgroup's files and its disks.

Nothing runs in the sandbox and nothing wakes it: a paused container's cgroup is read
as it is (frozen processes keep their memory), a stopped one has no processes to read.
The cgroup is found through ``/proc/<the container's pid>/cgroup`` (cgroup v1: one
path per controller; v2: one path for all) under ``/sys/fs/cgroup``, which takes
microseconds. Where this process cannot see them (it runs in a container of its own,
without the host's ``/proc``), the engine's one-shot stats are read instead: the same
numbers, but each call waits for the engine's collector (about a second).

Disks: the workspace's own file system (``disks.py``) is mounted by the engine while
the container runs or is paused, and ``statvfs`` of that mount says its size and use;
a stopped sandbox's is not mounted (``None``), nor is a plain volume a file system of
its own. The writable layer has one only with ``SIESTA_SANDBOX__CONTAINER_DISK_MB``
(``layers.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

from runtime.providers.base import WORKSPACE, DiskUsage, SandboxState, SandboxUsage
from runtime.providers.docker.errors import docker_errors
from runtime.providers.docker.layers import MOUNT_DIR

PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")
NO_LIMIT = 2**62
"""cgroup v1 says "no memory limit" with a number near 2**63."""
STATES = {"running": SandboxState.RUNNING, "restarting": SandboxState.RUNNING}


@dataclass(frozen=True)
class CgroupSample:
    cpu_seconds: float
    memory_used_bytes: int
    memory_cache_bytes: int
    memory_limit_bytes: int | None
    pids: int | None


def read_usage(api: docker.APIClient, sandbox_id: str, *, layered: bool) -> SandboxUsage:
    """The sandbox's usage (``layered``: its writable layer has a disk of its own)."""
    with docker_errors():
        try:
            attrs = api.inspect_container(sandbox_id)
        except docker.errors.NotFound:
            return SandboxUsage(SandboxState.MISSING, cpu_limit=0.0)
    status = str(attrs["State"]["Status"])
    state = SandboxState.PAUSED if status == "paused" else STATES.get(status)
    limit = cpu_limit(attrs["HostConfig"])
    root = disk_usage(MOUNT_DIR / sandbox_id) if layered else None
    if state is None:  # exited, created, dead: no processes, its workspace unmounted
        return SandboxUsage(SandboxState.STOPPED, cpu_limit=limit, root=root)
    pid = int(attrs["State"].get("Pid") or 0)
    sample = cgroup_sample(pid) if pid else None
    if sample is None:
        sample = _engine_sample(api, sandbox_id)
    return SandboxUsage(
        state,
        cpu_limit=limit,
        cpu_seconds=sample.cpu_seconds,
        memory_used_bytes=sample.memory_used_bytes,
        memory_cache_bytes=sample.memory_cache_bytes,
        memory_limit_bytes=sample.memory_limit_bytes,
        pids=sample.pids,
        workspace=_workspace_usage(api, attrs),
        root=root,
    )


def cpu_limit(host_config: dict[str, Any]) -> float:
    """The cores the container may use: its ``--cpus``, else its quota, else its cpuset,
    else the host's."""
    if host_config.get("NanoCpus"):
        return float(host_config["NanoCpus"]) / 1e9
    quota, period = host_config.get("CpuQuota") or 0, host_config.get("CpuPeriod") or 0
    if quota > 0 and period > 0:
        return float(quota) / float(period)
    cpuset = str(host_config.get("CpusetCpus") or "")
    if cpuset:
        return float(len(_cpu_list(cpuset)))
    return float(os.cpu_count() or 1)


def _cpu_list(cpuset: str) -> set[int]:
    cpus: set[int] = set()
    for part in cpuset.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def disk_usage(path: Path) -> DiskUsage | None:
    """``path``'s file system, when ``path`` is a mount point of its own."""
    try:
        if not path.is_mount():
            return None
        stat = os.statvfs(path)
    except OSError:
        return None
    total = stat.f_blocks * stat.f_frsize
    free = stat.f_bavail * stat.f_frsize
    return DiskUsage(
        used_bytes=(stat.f_blocks - stat.f_bfree) * stat.f_frsize,
        total_bytes=total,
        free_bytes=free,
    )


def _workspace_usage(api: docker.APIClient, attrs: dict[str, Any]) -> DiskUsage | None:
    mounts: list[dict[str, Any]] = attrs.get("Mounts") or []
    source = next((m.get("Source") for m in mounts if m.get("Destination") == WORKSPACE), None)
    return disk_usage(Path(source)) if source else None


def cgroup_sample(pid: int, proc: Path = PROC, root: Path = CGROUP_ROOT) -> CgroupSample | None:
    """The cgroup of process ``pid`` (the container's first process), or ``None`` when
    it cannot be read from here."""
    try:
        paths = cgroup_paths((proc / str(pid) / "cgroup").read_text())
        if "" in paths and (root / "cgroup.controllers").exists():
            return _unified(root / paths[""].lstrip("/"))
        return _legacy({name: root / name / path.lstrip("/") for name, path in paths.items()})
    except (OSError, ValueError, KeyError):
        return None


def cgroup_paths(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` as {controller: path}; cgroup v2's line is ``""``."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(","):
            paths[name.removeprefix("name=")] = path
    return paths


def _unified(group: Path) -> CgroupSample:
    cpu = _keyed(group / "cpu.stat")
    memory = _keyed(group / "memory.stat")
    current = int((group / "memory.current").read_text())
    limit = (group / "memory.max").read_text().strip()
    return CgroupSample(
        cpu_seconds=cpu["usage_usec"] / 1e6,
        memory_used_bytes=max(0, current - memory.get("inactive_file", 0)),
        memory_cache_bytes=memory.get("file", 0),
        memory_limit_bytes=None if limit == "max" else int(limit),
        pids=_optional_int(group / "pids.current"),
    )


def _legacy(groups: dict[str, Path]) -> CgroupSample:
    memory = groups["memory"]
    stat = _keyed(memory / "memory.stat")
    usage = int((memory / "memory.usage_in_bytes").read_text())
    limit = int((memory / "memory.limit_in_bytes").read_text())
    pids = groups.get("pids")
    return CgroupSample(
        cpu_seconds=int((groups["cpuacct"] / "cpuacct.usage").read_text()) / 1e9,
        memory_used_bytes=max(0, usage - stat.get("total_inactive_file", 0)),
        memory_cache_bytes=stat.get("total_cache", 0),
        memory_limit_bytes=None if limit >= NO_LIMIT else limit,
        pids=_optional_int(pids / "pids.current") if pids is not None else None,
    )


def _keyed(path: Path) -> dict[str, int]:
    """A cgroup file of ``name value`` lines."""
    pairs = (line.split() for line in path.read_text().splitlines())
    return {pair[0]: int(pair[1]) for pair in pairs if len(pair) == 2}


def _optional_int(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def _engine_sample(api: docker.APIClient, sandbox_id: str) -> CgroupSample:
    with docker_errors():
        stats: dict[str, Any] = api.stats(sandbox_id, stream=False, one_shot=True)
    memory = stats.get("memory_stats") or {}
    detail = memory.get("stats") or {}
    inactive = detail.get("total_inactive_file", detail.get("inactive_file", 0))
    limit = int(memory.get("limit") or 0)
    return CgroupSample(
        cpu_seconds=int(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9,
        memory_used_bytes=max(0, int(memory.get("usage") or 0) - int(inactive)),
        memory_cache_bytes=int(detail.get("total_cache", detail.get("file", 0))),
        memory_limit_bytes=limit if 0 < limit < NO_LIMIT else None,
        pids=(stats.get("pids_stats") or {}).get("current"),
    )
