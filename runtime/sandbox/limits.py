"""Which sandbox limits a command ran into, stated with the value in force.

A model reading ``exit code 137`` or ``fork: Resource temporarily unavailable``
cannot tell a memory limit from a bug; the result says which limit it was.
"""

from __future__ import annotations

from siesta_contract.functions.sandbox import LimitReached

from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import ExecResult

MIB = 1024 * 1024
FULL_BELOW_BYTES = 1 * MIB
"""A file system with less than this left counts as full (blocks are reserved in
units, so "0 bytes free" is not what a full one always says)."""


def limits_reached(
    result: ExecResult,
    *,
    timeout_seconds: int,
    max_output_bytes: int,
    sandbox: SandboxSettings,
    workspace_limit_mb: int | None = None,
    container_disk_limit_mb: int | None = None,
) -> list[LimitReached]:
    reached: list[LimitReached] = []
    pressure = result.pressure
    if result.timed_out:
        reached.append(
            LimitReached(
                limit="timeout",
                value=timeout_seconds,
                unit="seconds",
                message=f"the command ran past its timeout of {timeout_seconds} s and was ended",
            )
        )
    if result.stdout.truncated or result.stderr.truncated:
        reached.append(
            LimitReached(
                limit="output",
                value=max_output_bytes,
                unit="bytes",
                message=(
                    f"output past {max_output_bytes} bytes per stream was cut "
                    "(the start and the end are kept)"
                ),
            )
        )
    if pressure.oom_kills:
        reached.append(
            LimitReached(
                limit="memory",
                value=sandbox.memory_limit_mb,
                unit="MiB",
                message=(
                    f"the kernel killed {pressure.oom_kills} process(es) at the sandbox's "
                    f"memory limit of {sandbox.memory_limit_mb} MiB"
                ),
            )
        )
    if pressure.pids_refusals:
        reached.append(
            LimitReached(
                limit="processes",
                value=sandbox.pids_limit,
                unit="processes",
                message=(
                    f"{pressure.pids_refusals} fork(s) failed at the sandbox's limit of "
                    f"{sandbox.pids_limit} processes and threads"
                ),
            )
        )
    for limit, free, size, where in (
        ("workspace_disk", pressure.workspace_free_bytes, workspace_limit_mb, "/mnt/work"),
        ("container_disk", pressure.root_free_bytes, container_disk_limit_mb, "the system"),
    ):
        if size is not None and free is not None and free < FULL_BELOW_BYTES:
            reached.append(
                LimitReached(
                    limit=limit,
                    value=size,
                    unit="MiB",
                    message=f"{where} is full: its limit is {size} MiB",
                )
            )
    return reached
