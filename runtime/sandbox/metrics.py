"""A conversation's sandbox, measured live: CPU, memory, disk, processes.

Read from outside the sandbox by its provider (``SandboxLifecycle.usage``): no exec,
no lease, and nothing resumed, so measuring never waits behind a command and never
wakes a paused sandbox. CPU use is a rate: the CPU time used between two samples of
the sandbox over the time between them, as a share of the cores it may use. The
previous sample of each sandbox is kept (in this instance); without a recent one, a
second sample is taken ``SIESTA_METRICS__CPU_WINDOW_SECONDS`` after the first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from runtime.core.context import CallContext
from runtime.core.errors import NotFound
from runtime.core.records import SessionRecord
from runtime.providers.base import SandboxState, SandboxUsage
from runtime.sandbox.settings import MetricsSettings

EgressRefusals = Callable[[CallContext], int | None]
"""How many connections the egress proxy refused the conversation (network rules)."""


class NoSandbox(NotFound):
    code = "sandbox_not_found"


@dataclass(frozen=True)
class SandboxMetrics:
    usage: SandboxUsage
    sampled_at: float
    """Unix time of the sample."""
    cpu_used_pct: float | None
    """Share of its CPU limit used lately, 0 to 100 (``None``: stopped or missing)."""
    egress_refusals: int | None = None


@dataclass(frozen=True)
class _CpuSample:
    at: float
    """The monotonic clock's time of the sample."""
    cpu_seconds: float


class SandboxMeter:
    def __init__(
        self,
        describe: Callable[[CallContext], SessionRecord | None],
        usage: Callable[[str], SandboxUsage],
        settings: MetricsSettings,
        *,
        egress_refusals: EgressRefusals | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``describe``: the conversation's session (``SessionManager.describe``);
        ``usage``: its provider's ``SandboxLifecycle.usage``."""
        self._describe = describe
        self._usage = usage
        self._settings = settings
        self._egress_refusals = egress_refusals
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._previous: OrderedDict[str, _CpuSample] = OrderedDict()
        self._lock = threading.Lock()

    def measure(self, ctx: CallContext) -> SandboxMetrics:
        """The conversation's sandbox now; ``NoSandbox`` when it never had one."""
        record = self._describe(ctx)
        if record is None:
            msg = f"conversation {ctx.conversation!r} has no sandbox"
            raise NoSandbox(msg, conversation=ctx.conversation)
        sandbox_id = record.sandbox_id
        usage = self._usage(sandbox_id)
        refusals = self._egress_refusals(ctx) if self._egress_refusals is not None else None
        if usage.cpu_seconds is None:
            self._forget(sandbox_id)
            return SandboxMetrics(usage, self._clock(), None, refusals)
        now = self._monotonic()
        previous = self._recent(sandbox_id, now)
        if previous is not None and usage.cpu_seconds < previous.cpu_seconds:
            previous = None  # the container started again since, and so did its counter
        if previous is None and usage.state is SandboxState.RUNNING:
            previous = _CpuSample(now, usage.cpu_seconds)
            self._sleep(self._settings.cpu_window_seconds)
            usage = self._usage(sandbox_id)
            now = self._monotonic()
        percent = _percent(previous, now, usage)
        if usage.cpu_seconds is not None:
            self._keep(sandbox_id, _CpuSample(now, usage.cpu_seconds))
        return SandboxMetrics(usage, self._clock(), percent, refusals)

    def _recent(self, sandbox_id: str, now: float) -> _CpuSample | None:
        with self._lock:
            sample = self._previous.get(sandbox_id)
        if sample is None or now - sample.at > self._settings.cpu_sample_max_age_seconds:
            return None
        return sample

    def _keep(self, sandbox_id: str, sample: _CpuSample) -> None:
        with self._lock:
            self._previous[sandbox_id] = sample
            self._previous.move_to_end(sandbox_id)
            while len(self._previous) > self._settings.max_tracked_sandboxes:
                self._previous.popitem(last=False)

    def _forget(self, sandbox_id: str) -> None:
        with self._lock:
            self._previous.pop(sandbox_id, None)


def _percent(previous: _CpuSample | None, now: float, usage: SandboxUsage) -> float | None:
    if usage.cpu_seconds is None:
        return None
    if usage.state is SandboxState.PAUSED:
        return 0.0  # frozen: nothing runs
    elapsed = now - previous.at if previous is not None else 0.0
    if previous is None or elapsed <= 0 or usage.cpu_limit <= 0:
        return None
    used = usage.cpu_seconds - previous.cpu_seconds
    if used < 0:  # restarted between the two samples of a window
        return None
    return round(min(100.0, 100.0 * used / (elapsed * usage.cpu_limit)), 2)
