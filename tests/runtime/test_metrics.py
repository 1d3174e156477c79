"""CPU use as a rate between two samples (``runtime.sandbox.metrics``), on a clock the
test moves: the sandbox's CPU counter is scripted, the arithmetic is the meter's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runtime.core.context import CallContext
from runtime.core.errors import SandboxUnavailable
from runtime.core.records import SessionRecord, SessionStatus
from runtime.sandbox.metrics import NoSandbox, SandboxMeter
from runtime.sandbox.settings import MetricsSettings
from runtime.seams.providers import SandboxState, SandboxUsage

CTX = CallContext(org="org-a", user="u", conversation="conv-1")
RECORD = SessionRecord(
    org="org-a",
    conversation="conv-1",
    session_id="s1",
    sandbox_id="sandbox-1",
    image_id="debian-base",
    image_ref="siesta/debian-base:1",
    status=SessionStatus.ACTIVE,
    created_at=0.0,
    last_used_at=0.0,
    generation=1,
)


class Sandbox:
    """A sandbox of 2 cores whose processes use ``busy`` cores while the clock runs."""

    def __init__(self) -> None:
        self.now = 100.0
        self.cpu_seconds = 0.0
        self.busy = 1.0
        self.state = SandboxState.RUNNING
        self.samples = 0

    def advance(self, seconds: float) -> None:
        self.now += seconds
        if self.state is SandboxState.RUNNING:
            self.cpu_seconds += self.busy * seconds

    def usage(self, sandbox_id: str) -> SandboxUsage:
        assert sandbox_id == "sandbox-1"
        self.samples += 1
        if self.state is SandboxState.STOPPED:
            return SandboxUsage(self.state, cpu_limit=2.0)
        return SandboxUsage(self.state, cpu_limit=2.0, cpu_seconds=self.cpu_seconds)


def meter(sandbox: Sandbox, **settings: float) -> SandboxMeter:
    return SandboxMeter(
        lambda ctx: RECORD if ctx.conversation == "conv-1" else None,
        sandbox.usage,
        MetricsSettings(**settings),
        clock=lambda: sandbox.now,
        monotonic=lambda: sandbox.now,
        sleep=sandbox.advance,
    )


def test_the_first_sample_waits_one_window_later_ones_use_the_previous() -> None:
    sandbox = Sandbox()
    measuring = meter(sandbox, cpu_window_seconds=0.5, cpu_sample_max_age_seconds=30)

    first = measuring.measure(CTX)
    assert (first.cpu_used_pct, sandbox.samples) == (50.0, 2)  # 1 of 2 cores

    sandbox.busy = 2.0
    sandbox.advance(10)
    second = measuring.measure(CTX)
    assert (second.cpu_used_pct, sandbox.samples) == (100.0, 3)  # no wait this time

    sandbox.busy = 0.5
    sandbox.advance(60)  # the previous sample is too old to average over
    assert measuring.measure(CTX).cpu_used_pct == 25.0
    assert sandbox.samples == 5


def test_a_paused_sandbox_uses_nothing_and_a_stopped_one_is_not_measured() -> None:
    sandbox = Sandbox()
    measuring = meter(sandbox)
    sandbox.state = SandboxState.PAUSED
    paused = measuring.measure(CTX)
    assert (paused.cpu_used_pct, sandbox.samples) == (0.0, 1)  # frozen: no second sample

    sandbox.state = SandboxState.STOPPED
    assert measuring.measure(CTX).cpu_used_pct is None


def test_a_counter_that_went_back_is_a_restart_measured_afresh() -> None:
    sandbox = Sandbox()
    measuring = meter(sandbox, cpu_window_seconds=0.5)
    measuring.measure(CTX)
    sandbox.advance(1)
    sandbox.cpu_seconds = 0.1  # the container started again
    assert measuring.measure(CTX).cpu_used_pct == 50.0  # over a new window, not negative


def test_a_conversation_without_a_session_has_no_sandbox() -> None:
    with pytest.raises(NoSandbox):
        meter(Sandbox()).measure(CallContext(org="org-a", user="u", conversation="conv-2"))


class Fleet:
    """Sandboxes of 2 cores on one clock, each using its ``busy`` cores; one is removed
    between the conversation's lookup and its sample (the engine no longer has it)."""

    def __init__(self, busy: dict[str, float], removed: str) -> None:
        self.now = 100.0
        self.busy = busy
        self.cpu_seconds = dict.fromkeys(busy, 0.0)
        self.removed = removed
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        for sandbox_id, cores in self.busy.items():
            self.cpu_seconds[sandbox_id] += cores * seconds

    def usage(self, sandbox_id: str) -> SandboxUsage:
        if sandbox_id == self.removed:
            msg = f"the sandbox {sandbox_id} vanished during the operation"
            raise SandboxUnavailable(msg)
        cpu = self.cpu_seconds[sandbox_id]
        return SandboxUsage(SandboxState.RUNNING, cpu_limit=2.0, cpu_seconds=cpu)


def test_many_sandboxes_are_measured_over_one_window_the_unmeasurable_left_out() -> None:
    fleet = Fleet({"sandbox-a": 1.0, "sandbox-b": 2.0, "sandbox-c": 0.5}, removed="sandbox-c")
    with_sandbox = {"conv-a": "sandbox-a", "conv-b": "sandbox-b", "conv-c": "sandbox-c"}
    measuring = SandboxMeter(
        lambda ctx: (
            replace(RECORD, sandbox_id=with_sandbox[ctx.conversation])
            if ctx.conversation in with_sandbox
            else None
        ),
        fleet.usage,
        MetricsSettings(cpu_window_seconds=0.5),
        clock=lambda: fleet.now,
        monotonic=lambda: fleet.now,
        sleep=fleet.sleep,
    )
    asked = {
        name: CallContext(org="org-a", user="u", conversation=f"conv-{name}")
        for name in ("a", "b", "c", "making")  # "making": its sandbox is not made yet
    }

    measured = measuring.measure_many(asked)

    assert {name: m.cpu_used_pct for name, m in measured.items()} == {"a": 50.0, "b": 100.0}
    assert fleet.sleeps == [0.5]  # one window for all, not one each
    fleet.sleep(1)
    again = measuring.measure_many({"a": asked["a"], "b": asked["b"]})
    assert {name: m.cpu_used_pct for name, m in again.items()} == {"a": 50.0, "b": 100.0}
    assert fleet.sleeps == [0.5, 1]  # the samples just taken start the next windows
