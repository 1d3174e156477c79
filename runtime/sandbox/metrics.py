"""A conversation's sandbox, measured live: CPU, memory, disk, processes.

Read from outside the sandbox by its provider (``SandboxLifecycle.usage``): no exec,
no lease, and nothing resumed, so measuring never waits behind a command and never
wakes a paused sandbox. CPU use is a rate: the CPU time used between two samples of
the sandbox over the time between them, as a share of the cores it may use. The
previous sample of each sandbox is kept (in this instance); without a recent one, a
second sample is taken ``SIESTA_METRICS__CPU_WINDOW_SECONDS`` after the first (several
sandboxes measured together share that one wait).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TypeVar

from runtime.core.context import CallContext
from runtime.core.errors import NotFound, SandboxUnavailable
from runtime.core.records import SessionRecord
from runtime.sandbox.settings import MetricsSettings
from runtime.seams.providers import SandboxState, SandboxUsage

EgressRefusals = Callable[[CallContext], int | None]
"""How many connections the egress proxy refused the conversation (network rules)."""
log = logging.getLogger(__name__)


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

    @property
    def measurable(self) -> bool:
        """Its processes are there to measure: running, or frozen by a pause."""
        return self.usage.state in (SandboxState.RUNNING, SandboxState.PAUSED)


@dataclass(frozen=True)
class _CpuSample:
    at: float
    """The monotonic clock's time of the sample."""
    cpu_seconds: float


@dataclass(frozen=True)
class _Sample:
    """One sandbox's usage read, and what its CPU rate is measured from."""

    sandbox_id: str
    usage: SandboxUsage
    refusals: int | None
    at: float
    """The monotonic clock's time of ``usage``."""
    previous: _CpuSample | None
    wants_second: bool = False
    """No earlier sample was recent enough: another is taken a CPU window later."""


K = TypeVar("K", bound=Hashable)
_In = TypeVar("_In")


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
        first = self._first_sample(ctx)
        if first.wants_second:
            self._wait_window(first.previous)
            first = self._second_sample(first)
        return self._finish(first)

    def measure_many(self, contexts: Mapping[K, CallContext]) -> dict[K, SandboxMetrics]:
        """Several conversations' sandboxes now, for the same price in waiting as one:
        the first samples are all taken, one CPU window waited, then the second ones
        (each step ``batch_concurrency`` sandboxes at a time). A conversation whose
        sandbox cannot be measured (none yet, being made or removed meanwhile) is left
        out rather than failing the others; an engine that cannot be reached, or cannot
        measure at all, fails the call."""
        samples = self._each(contexts, self._first_sample)
        waiting = {key: first for key, first in samples.items() if first.wants_second}
        if waiting:
            self._wait_window(*(first.previous for first in waiting.values()))
            for key in waiting:
                del samples[key]  # a rate needs the second sample: without it, left out
            samples.update(self._each(waiting, self._second_sample))
        return {key: self._finish(sample) for key, sample in samples.items()}

    def _each(self, items: Mapping[K, _In], step: Callable[[_In], _Sample]) -> dict[K, _Sample]:
        """``step`` of every item, several at once; those whose sandbox was not found or
        not available are left out."""
        if not items:
            return {}
        workers = min(len(items), self._settings.batch_concurrency)
        with ThreadPoolExecutor(workers, thread_name_prefix="metrics") as pool:
            futures = {key: pool.submit(step, item) for key, item in items.items()}
        done: dict[K, _Sample] = {}
        for key, future in futures.items():
            try:
                done[key] = future.result()
            except (NotFound, SandboxUnavailable) as exc:  # this sandbox's, not the engine's
                log.info("a sandbox was left out of a batch of metrics: %s", exc)
        return done

    def _first_sample(self, ctx: CallContext) -> _Sample:
        record = self._describe(ctx)
        if record is None:
            msg = f"conversation {ctx.conversation!r} has no sandbox"
            raise NoSandbox(msg, conversation=ctx.conversation)
        sandbox_id = record.sandbox_id
        usage = self._usage(sandbox_id)
        refusals = self._egress_refusals(ctx) if self._egress_refusals is not None else None
        if usage.cpu_seconds is None:
            self._forget(sandbox_id)
            return _Sample(sandbox_id, usage, refusals, self._monotonic(), None)
        now = self._monotonic()
        previous = self._recent(sandbox_id, now)
        if previous is not None and usage.cpu_seconds < previous.cpu_seconds:
            previous = None  # the container started again since, and so did its counter
        if previous is None and usage.state is SandboxState.RUNNING:
            # No rate without an earlier sample: this one is the start of a window.
            return _Sample(
                sandbox_id, usage, refusals, now, _CpuSample(now, usage.cpu_seconds), True
            )
        return _Sample(sandbox_id, usage, refusals, now, previous)

    def _wait_window(self, *starts: _CpuSample | None) -> None:
        """Until the latest of ``starts`` is a CPU window old."""
        latest = max(start.at for start in starts if start is not None)
        remaining = self._settings.cpu_window_seconds - (self._monotonic() - latest)
        if remaining > 0:
            self._sleep(remaining)

    def _second_sample(self, first: _Sample) -> _Sample:
        usage = self._usage(first.sandbox_id)
        return replace(first, usage=usage, at=self._monotonic(), wants_second=False)

    def _finish(self, sample: _Sample) -> SandboxMetrics:
        usage = sample.usage
        percent = _percent(sample.previous, sample.at, usage)
        if usage.cpu_seconds is not None:
            self._keep(sample.sandbox_id, _CpuSample(sample.at, usage.cpu_seconds))
        return SandboxMetrics(usage, self._clock(), percent, sample.refusals)

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
