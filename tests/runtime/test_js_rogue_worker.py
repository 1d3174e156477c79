"""A worker that says what it should not: the service reads it as hostile.

Each test starts a rogue worker (a process on the same two pipes that sends
frames of its choosing instead of running V8, as a compromised worker could) and
runs a script session against it with the service's own ``Session``. The
session must end with ``js_crashed`` naming what was wrong, or at the deadline,
never hang, never keep more than its limits, and never hand a rogue value on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from runtime.jsexec.helpers import HelperHost
from runtime.jsexec.pool import Worker
from runtime.jsexec.session import ScriptOutcome, Session
from runtime.jsexec.settings import JsSettings

SETTINGS = JsSettings(
    jail="off",
    max_worker_message_bytes=64 * 1024,
    max_log_entries=10,
    max_helper_calls=5,
    max_result_bytes=1024,
)
PRELUDE = """
import json, os, struct, sys, time
from runtime.jsexec.protocol import send, receive
IN, OUT = int(sys.argv[1]), int(sys.argv[2])
def raw(data): os.write(OUT, data)
def frame(payload): raw(struct.pack('>I', len(payload)) + payload)
request = receive(IN)
"""


def rogue(body: str) -> Worker:
    to_worker_r, to_worker = os.pipe()
    from_worker, from_worker_w = os.pipe()
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PRELUDE + textwrap.dedent(body),
            str(to_worker_r),
            str(from_worker_w),
        ],
        pass_fds=(to_worker_r, from_worker_w),
        start_new_session=True,
    )
    os.close(to_worker_r)
    os.close(from_worker_w)
    return Worker(process.pid, to_worker, from_worker, process)


def session(body: str, timeout: float = 5.0, dispatch: Any = None) -> tuple[ScriptOutcome, float]:
    worker = rogue(body)
    outcome = ScriptOutcome()
    started = time.monotonic()
    try:
        Session(worker, SETTINGS, dispatch or _echo, lambda _: None, outcome).run(
            "1", started + timeout, timeout
        )
    finally:
        worker.kill()
    return outcome, time.monotonic() - started


def _echo(helper: str, args: list[Any], _remaining: float) -> Any:
    return {"helper": helper, "args": args}


def crashed_saying(outcome: ScriptOutcome, words: str) -> None:
    assert outcome.error is not None
    assert outcome.error["code"] == "js_crashed", outcome.error
    assert words in outcome.error["message"], outcome.error["message"]


def test_a_frame_over_the_limit_stops_the_worker_before_it_is_read() -> None:
    outcome, seconds = session("raw(struct.pack('>I', 2**31)); time.sleep(30)")
    crashed_saying(outcome, f"over the limit of {SETTINGS.max_worker_message_bytes} bytes")
    assert seconds < 2


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("frame(b'\\xff not json')", "not JSON"),
        ("frame(b'[1, 2]')", "not an object"),
        ("send(OUT, {'type': 'shell', 'command': 'id'})", "unknown type 'shell'"),
        ("send(OUT, {'type': 'log', 'message': {'a': 1}})", "message is not text"),
        ("send(OUT, {'type': 'call', 'helper': None, 'args': []})", "without a helper name"),
        ("send(OUT, {'type': 'done', 'result': {'forged': 1}})", "result that is not text"),
        ("send(OUT, {'type': 'done', 'result': 'x' * 5000})", "over the limit of 1024 bytes"),
        ("send(OUT, {'type': 'done', 'result': None, 'error': {'code': 'oops'}})", "js_ code"),
        ("send(OUT, {'type': 'done', 'result': '1', 'droppedLogs': -5})", "not a count"),
    ],
)
def test_a_malformed_message_stops_that_worker_and_says_why(body: str, words: str) -> None:
    outcome, _ = session(body + "\ntime.sleep(30)")
    crashed_saying(outcome, words)
    assert outcome.result is None


def test_a_frame_that_never_finishes_ends_at_the_deadline() -> None:
    outcome, seconds = session("raw(struct.pack('>I', 100) + b'{\"ty'); time.sleep(30)", timeout=1)
    assert outcome.error is not None and outcome.error["code"] == "js_timeout"
    assert seconds < 3


def test_a_worker_that_stops_reading_cannot_hold_the_service() -> None:
    # a helper reply far larger than a pipe's buffer, to a worker that never reads it
    body = "send(OUT, {'type': 'call', 'helper': 'big', 'args': []}); time.sleep(30)"
    outcome, seconds = session(body, timeout=1, dispatch=lambda *_: "x" * (4 * 1024 * 1024))
    assert outcome.error is not None and outcome.error["code"] == "js_timeout"
    assert seconds < 3


def test_a_flood_of_logs_keeps_only_the_limits() -> None:
    body = """
    for i in range(20000):
        send(OUT, {'type': 'log', 'message': ''})
        send(OUT, {'type': 'status', 'message': 's'})
    send(OUT, {'type': 'done', 'result': 'ok'})
    """
    outcome, _ = session(body, timeout=30)
    assert outcome.error is None
    assert outcome.result == "ok"
    assert len(outcome.logs) == SETTINGS.max_log_entries
    assert len(outcome.statuses) == SETTINGS.max_status_entries
    assert outcome.truncated["logs"] is True
    assert outcome.truncated["droppedStatuses"] == 20000 - SETTINGS.max_status_entries


def test_helper_calls_past_the_limit_are_refused_and_name_it() -> None:
    body = """
    answers = []
    for i in range(8):
        send(OUT, {'type': 'call', 'helper': 'listExcelSheets', 'args': ['a']})
        answers.append(receive(IN))
    oks = [answer['ok'] for answer in answers]
    send(OUT, {'type': 'done', 'result': json.dumps(oks + [answers[-1]['error']])})
    """
    outcome, _ = session(body, timeout=10)
    assert outcome.result is not None
    *oks, last_error = json.loads(outcome.result)
    assert oks == [True] * 5 + [False] * 3
    assert last_error == "listExcelSheets: over the limit of 5 helper calls in one script"


def test_a_rogue_worker_asking_for_a_helper_that_does_not_exist_gets_a_refusal() -> None:
    nothing: Any = None  # the refusal comes before any file or agent is touched
    host = HelperHost(nothing, nothing, nothing, SETTINGS, nothing)
    body = """
    send(OUT, {'type': 'call', 'helper': '__proto__', 'args': []})
    send(OUT, {'type': 'done', 'result': receive(IN)['error']})
    """
    outcome, _ = session(body, dispatch=host.dispatch)
    assert outcome.result == "unknown helper '__proto__'"
