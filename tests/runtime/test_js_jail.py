"""The JS worker's jail, attacked from inside as if V8 were already broken.

Each test runs Python in a jailed worker (``tests/jail_probe.py``: the template's
jail, then a snippet instead of a script) and asserts the attempt was refused
(an error the snippet reports) or the worker was killed (SIGSYS from seccomp,
a resource limit's signal) — and that nothing reached what it aimed at."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.jsexec.jail import problem
from runtime.jsexec.pool import WorkerPool, jail_spec
from runtime.jsexec.settings import JsSettings
from runtime.jsexec.zygote import template_environment
from tests.helpers import wait_until

pytestmark = pytest.mark.slow

MODES = ["full", "unprivileged"]
KILLED_BY_SECCOMP = signal.SIGSYS
REPOSITORY = Path(__file__).resolve().parents[2]


def probe(mode: str, snippet: str) -> dict[str, Any]:
    assert problem(mode) is None, problem(mode)  # type: ignore[arg-type]
    done = subprocess.run(
        [sys.executable, "-m", "tests.jail_probe", mode, snippet],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPOSITORY,
        check=True,
    )
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def refused(outcome: dict[str, Any]) -> list[str]:
    assert outcome["exit"] == 0, outcome
    reports: list[str] = outcome["reports"]
    return reports


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_reads_no_environment_and_no_file_of_the_service(mode: str) -> None:
    targets = [
        "/proc/1/environ",
        "/proc/self/environ",
        str(REPOSITORY / "pyproject.toml"),
        "/var/run/docker.sock",
        "/etc/passwd",
    ]
    snippet = f"""
for path in {targets!r}:
    try:
        open(path, 'rb').read(1)
        report('read ' + path)
    except OSError as error:
        report(type(error).__name__)
try:
    os.listdir('/')
    report('listed /')
except OSError as error:
    report(type(error).__name__)
"""
    assert refused(probe(mode, snippet)) == ["FileNotFoundError"] * (len(targets) + 1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "attack",
    [
        "socket.socket(socket.AF_INET, socket.SOCK_STREAM)",  # the egress proxy, 127.0.0.1
        "socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",  # the Docker socket
        "os.execv('/bin/sh', ['sh', '-c', 'id'])",
        "ctypes.CDLL(None).ptrace(16, 1, 0, 0)",  # PTRACE_ATTACH to pid 1
        "os.fork()",
        "os.kill(1, signal.SIGKILL)",
        "os.write(1, b'to the service log')",  # only the reply pipe is writable
        "os.read(5, 1)",  # only the request pipe is readable
        "os.dup(4)",
    ],
)
def test_a_worker_is_killed_for_what_v8_never_does(mode: str, attack: str) -> None:
    outcome = probe(mode, f"report('before')\n{attack}\nreport('after')")
    assert outcome["signal"] == KILLED_BY_SECCOMP, outcome
    assert outcome["reports"] == ["before"]


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_cannot_allocate_past_its_address_space(mode: str) -> None:
    snippet = """
try:
    hoard = bytearray(2 * 1024 ** 3)
    report('allocated')
except MemoryError:
    report('MemoryError')
"""
    assert refused(probe(mode, snippet)) == ["MemoryError"]


@pytest.mark.parametrize("mode", MODES)
def test_a_spinning_worker_is_stopped_by_its_cpu_limit(mode: str) -> None:
    outcome = probe(mode, "report('spinning')\nwhile True:\n    pass")
    assert outcome["signal"] in (signal.SIGXCPU, signal.SIGKILL), outcome


def test_a_full_jail_runs_as_its_own_user_in_an_empty_root() -> None:
    snippet = "report(os.getuid()); report(os.getgid()); report(os.getpid())"
    uid, gid, pid = refused(probe("full", snippet))
    assert (uid, gid) == ("64200", "64200")
    assert pid == "1"  # alone in a PID namespace: no other process to see or signal


def test_the_template_holds_none_of_the_services_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIESTA_API_TOKEN", "secret-token-of-the-service")
    assert set(template_environment()) <= {"PYTHONPATH", "HOME"}
    pool = WorkerPool(JsSettings(pool_size=1))
    try:
        outcome = pool.run("1 + 1", lambda *_: None, lambda _: None, 10)
        assert outcome.result == "2"
        template = pool._template
        assert template is not None and template._process is not None
        environ = Path(f"/proc/{template._process.pid}/environ").read_bytes()
        assert b"SIESTA_" not in environ
        assert b"secret-token-of-the-service" not in environ
    finally:
        pool.close()


def test_no_jail_no_javascript_when_it_cannot_be_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 10001)
    pool = WorkerPool(JsSettings(pool_size=1, jail="full"))
    try:
        assert pool.jail_problem is not None
        assert "SIESTA_JS__JAIL=unprivileged" in pool.jail_problem
        with pytest.raises(Exception, match="unavailable") as raised:
            pool.run("1", lambda *_: None, lambda _: None, 5)
        assert getattr(raised.value, "code", None) == "js_unavailable"
    finally:
        pool.close()


def test_the_template_goes_when_its_service_dies_whoever_holds_its_socket() -> None:
    """A service killed outright: its template exits, even while another process still
    holds the service's end of their socket (a child that inherited it), which would
    otherwise keep the template waiting for a request forever."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    spec = json.dumps(jail_spec(JsSettings()).as_argument())
    # The launcher stands for the service: it starts the template, then dies at once;
    # this test keeps the service's end of the socket open.
    launcher = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-m', 'runtime.jsexec.zygote', sys.argv[1],"
        " sys.argv[2]], pass_fds=(int(sys.argv[1]),), stdin=subprocess.DEVNULL,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
        "import time; time.sleep(3)\n"  # the template is up and waiting when it dies
    )
    started = subprocess.run(
        [sys.executable, "-c", launcher, str(theirs.fileno()), spec],
        pass_fds=(theirs.fileno(),),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    theirs.close()
    template = int(started.stdout)
    try:
        assert wait_until(lambda: not running(template), timeout=20)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(template, signal.SIGKILL)
        ours.close()


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_template_that_stops_answering_is_replaced() -> None:
    """A template stuck (here: stopped) is not waited on forever: its FORK times out,
    it is killed and a new template forks the next worker; the pool serves again."""
    pool = WorkerPool(JsSettings(pool_size=1, template_answer_seconds=2.0))
    try:
        assert pool.run("1 + 1", lambda *_: None, lambda _: None, 10).result == "2"
        template = pool._template
        assert template is not None and template._process is not None
        stuck = template._process.pid
        assert wait_until(lambda: pool.ready_workers == 1, timeout=20)
        os.kill(stuck, signal.SIGSTOP)  # it takes no more requests
        # The ready worker serves this one; its successor is asked of the stuck template.
        assert pool.run("2 + 2", lambda *_: None, lambda _: None, 10).result == "4"
        assert pool.run("3 + 3", lambda *_: None, lambda _: None, 10).result == "6"
        assert template._process is not None and template._process.pid != stuck
        assert not running(stuck)
    finally:
        pool.close()
