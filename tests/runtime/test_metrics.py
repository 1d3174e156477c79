"""CPU use as a rate between two samples (``runtime.sandbox.metrics``), on a clock the
test moves: the sandbox's CPU counter is scripted, the arithmetic is the meter's."""

from __future__ import annotations

import pytest

from runtime.core.context import CallContext
from runtime.core.records import SessionRecord, SessionStatus
from runtime.providers.base import SandboxState, SandboxUsage
from runtime.sandbox.metrics import NoSandbox, SandboxMeter
from runtime.sandbox.settings import MetricsSettings

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
