"""The template process: Python and V8 loaded once, every worker a fork of it.

Starting a worker from scratch costs an interpreter and V8's import (about
150 ms of CPU); a fork of a process that has both costs a few milliseconds, so
the pool refills as fast as scripts use workers. The template never makes a
V8 context itself: a fork copies only the forking thread, and a context's
threads and locks would be copied half-way.

    service ⇄ template   one unix socket: "F" asks for a worker; the answer is
                         the worker's pid, with the service's two pipe ends
                         attached (SCM_RIGHTS)

The template starts with an empty environment (no secret of the service is in
its memory to be copied into a worker), builds the jail once (``jail.py``) and
locks each worker into it before the worker reports ready. It reaps its workers
(SIGCHLD ignored) and dies with the service.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading

from runtime.jsexec.jail import JailSpec

FORK = b"F"
PARENT_CHECK_SECONDS = 2.0

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    service = os.getppid()  # first: a service that dies while V8 loads is seen too
    from runtime.jsexec import worker  # V8 is loaded here, once
    from runtime.jsexec.jail import Jail

    control = socket.socket(fileno=int(argv[1]))
    jail = Jail(JailSpec(**json.loads(argv[2])))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    # The service's end of the socket closing ends the template; but a process that
    # inherited that end would keep it open after the service died (seen: a template
    # orphaned for 20 minutes after a SIGKILL). So the template also looks at its parent.
    # Not PR_SET_PDEATHSIG: that fires when the *thread* that started it ends, and the
    # service starts it from a short-lived thread.
    control.settimeout(PARENT_CHECK_SECONDS)
    while True:
        try:
            request = control.recv(1)
        except TimeoutError:
            if os.getppid() != service:
                return 0
            continue
        except OSError:
            return 0
        if request != FORK:
            return 0
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        pid = jail.spawn()
        if pid == 0:
            control.close()
            os.close(to_worker_w)
            os.close(from_worker_r)
            request_fd, reply_fd = jail.enter(to_worker_r, from_worker_w)
            os._exit(worker.serve(request_fd, reply_fd, jail.lock))
        os.close(to_worker_r)
        os.close(from_worker_w)
        socket.send_fds(control, [str(pid).encode()], [to_worker_w, from_worker_r])
        os.close(to_worker_w)
        os.close(from_worker_r)


def template_environment() -> dict[str, str]:
    """What the template inherits of the service's environment: where Python finds
    our modules and STPyV8 its ICU data (under ``HOME``), nothing else: no token, no
    store URL, no key."""
    return {name: os.environ[name] for name in ("PYTHONPATH", "HOME") if name in os.environ}


class Template:
    """The service's side: starts the template and asks it for workers."""

    def __init__(self, spec: JailSpec, answer_seconds: float) -> None:
        """``answer_seconds``: the longest it waits for the template's answer to a FORK."""
        self._spec = spec
        self._answer_seconds = answer_seconds
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    def fork(self) -> tuple[int, int, int]:
        """A new worker: (pid, fd to write to it, fd to read from it)."""
        with self._lock:
            for attempt in range(2):
                control = self._running()
                try:
                    control.sendall(FORK)
                    message, fds, _, _ = socket.recv_fds(control, 32, 2)
                    if len(fds) == 2 and message:
                        return int(message), fds[0], fds[1]
                except OSError as error:  # TimeoutError too: never waited on unbounded
                    log.warning("the JavaScript template did not fork a worker: %s", error)
                self._stop()  # it died or hangs: start it afresh, once
                if attempt:
                    break
        msg = (
            f"the JavaScript template process does not answer within "
            f"{self._answer_seconds:g} s (template_answer_seconds)"
        )
        raise OSError(msg)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _running(self) -> socket.socket:
        if self._control is not None and self._process is not None:
            if self._process.poll() is None:
                return self._control
            self._stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runtime.jsexec.zygote",
                str(theirs.fileno()),
                json.dumps(self._spec.as_argument()),
            ],
            pass_fds=(theirs.fileno(),),
            env=template_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        # It forks in milliseconds (0.14 s for the first, imports included): one that
        # has not answered in this long is stuck, and the pool's worker starters (and
        # its close() behind them) would wait on it forever.
        ours.settimeout(self._answer_seconds)
        self._control = ours
        return ours

    def _stop(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
