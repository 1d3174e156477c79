"""The jail a JS worker runs in, built as if V8 were already broken.

A script is model-written code: the worker that runs it is treated like a
sandbox. The template process (``zygote.py``) is started with an empty
environment and, in ``full`` mode, in namespaces of its own (no network at all,
its own mounts, IPC and host name); each worker is a clone of it in a new PID
namespace. Before a worker says it is ready, and so before any script arrives,
it locks itself in:

============================  ==================================================
what                          how
============================  ==================================================
file system                   ``chroot`` into an empty directory that no longer
                              exists (removed after the template opened it: no
                              file can be created in it); every call that names
                              a path fails with ENOENT
identity                      uid and gid ``jail_uid`` (no groups): no capability
                              left, in this or any namespace
privileges                    ``no_new_privs``; not dumpable (no ``/proc`` peeking,
                              no core)
system calls                  seccomp allowlist (``seccomp.py``): read its request
                              pipe, write its reply pipe, memory, clocks, futexes,
                              exit; anything else kills it
descriptors                   0-2 on ``/dev/null``, 3 the request pipe, 4 the reply
                              pipe; nothing else
processes                     PID namespace of its own; ``RLIMIT_NPROC`` 0
resources                     ``RLIMIT_AS`` (what V8 has mapped + a margin over the
                              memory limit), ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` 0,
                              ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` 0
lifetime                      killed when the template dies (``PR_SET_PDEATHSIG``);
                              the template leaves when the service's socket closes
============================  ==================================================

``unprivileged`` mode is for a service that is not root (the service image runs as
uid 10001 in a container that is itself the boundary): no namespaces, no chroot,
no change of uid; the rest holds, and seccomp alone keeps the file system and the
network out of reach. ``off`` runs workers as plain forks (for a benchmark's
baseline or a machine without libseccomp).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import platform
import resource
import signal
import tempfile
from dataclasses import asdict, dataclass
from functools import cache
from typing import Literal

from runtime.jsexec.seccomp import (
    Filter,
    SeccompUnavailable,
    check_available,
    compile_filter,
    libc,
    set_no_new_privs,
)

JailMode = Literal["full", "unprivileged", "off"]

REQUEST_FD = 3
"""Where a jailed worker reads the service's messages."""
REPLY_FD = 4
"""Where it writes its own."""

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
SYS_CLONE = {"x86_64": 56, "aarch64": 220}

CAP_SETGID, CAP_SETUID, CAP_SYS_CHROOT, CAP_SYS_ADMIN = 6, 7, 18, 21
FULL_MODE_CAPABILITIES = {
    CAP_SETGID: "CAP_SETGID",
    CAP_SETUID: "CAP_SETUID",
    CAP_SYS_CHROOT: "CAP_SYS_CHROOT",
    CAP_SYS_ADMIN: "CAP_SYS_ADMIN",
}


@dataclass(frozen=True)
class JailSpec:
    """What the service tells the template: the mode and the limits to set."""

    mode: JailMode
    uid: int
    cpu_seconds: int
    memory_margin_bytes: int
    """Address space a worker may add to what is mapped when it locks itself in."""

    def as_argument(self) -> dict[str, object]:
        return asdict(self)


def problem(mode: JailMode) -> str | None:
    """Why this machine cannot build a jail of this mode, or None when it can.

    Asked by the service before it starts a template: a jail that cannot be built
    means no JavaScript (never an unjailed fallback)."""
    if mode == "off":
        return None
    try:
        check_available()
    except SeccompUnavailable as error:
        return str(error)
    if mode == "unprivileged":
        return None
    if platform.machine() not in SYS_CLONE:
        return f"the full jail is not built for {platform.machine()}"
    missing = [name for bit, name in FULL_MODE_CAPABILITIES.items() if not _has_capability(bit)]
    if os.geteuid() != 0 or missing:
        return (
            "the full JavaScript jail needs root ("
            + (", ".join(missing) or "euid 0")
            + " missing): run the service as root or set SIESTA_JS__JAIL=unprivileged"
        )
    return None


class Jail:
    """The template's side: namespaces and the filter made once, a worker locked
    in at each ``lock``."""

    def __init__(self, spec: JailSpec) -> None:
        self.spec = spec
        self._root: int | None = None
        self._filter: Filter | None = None
        if spec.mode == "off":
            return
        # No parent-death signal for the template itself: it would fire when the
        # service *thread* that started it ends. It leaves when its socket closes.
        if spec.mode == "full":
            _unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS)
            self._root = _vanished_directory()
        self._filter = compile_filter(REQUEST_FD, REPLY_FD)

    def spawn(self) -> int:
        """Fork a worker: 0 in the worker, its pid in the template."""
        if self.spec.mode == "full":
            return _clone_in_new_pid_namespace()
        return os.fork()

    def enter(self, request: int, reply: int) -> tuple[int, int]:
        """In a new worker, before V8 makes its context: its own session, death with
        the template, and only its pipes (and the empty root) open."""
        os.setsid()  # its own process group: killed as a whole
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if self.spec.mode == "off":
            return request, reply
        _set_parent_death_signal()
        kept = [request, reply] + ([self._root] if self._root is not None else [])
        _keep_only(kept)
        if self._root is not None:
            self._root = REPLY_FD + 1
        return REQUEST_FD, REPLY_FD

    def lock(self) -> None:
        """Lock the worker in: after its context is made, before any script arrives."""
        if self.spec.mode == "off":
            return
        mapped = _mapped_bytes()
        if self._root is not None:
            os.fchdir(self._root)
            os.chroot(".")
            os.chdir("/")
            os.close(self._root)
            self._root = None
            os.setgroups([])
            os.setresgid(self.spec.uid, self.spec.uid, self.spec.uid)
            os.setresuid(self.spec.uid, self.spec.uid, self.spec.uid)
        _limit(resource.RLIMIT_AS, mapped + self.spec.memory_margin_bytes)
        _limit(resource.RLIMIT_CPU, self.spec.cpu_seconds)
        _limit(resource.RLIMIT_NPROC, 0)
        _limit(resource.RLIMIT_FSIZE, 0)
        _limit(resource.RLIMIT_CORE, 0)
        _limit(resource.RLIMIT_NOFILE, REPLY_FD + 1)
        libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        set_no_new_privs()
        assert self._filter is not None
        self._filter.load()


def _limit(which: int, value: int) -> None:
    resource.setrlimit(which, (value, value))


def _mapped_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _keep_only(fds: list[int]) -> None:
    """Renumber ``fds`` to 3, 4, ... and close every other descriptor above 2."""
    out_of_the_way = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
    for target, fd in enumerate(out_of_the_way, start=3):
        os.dup2(fd, target)
    os.closerange(3 + len(fds), os.sysconf("SC_OPEN_MAX"))


def _vanished_directory() -> int:
    """An open directory that has been removed: empty for good, nothing left on disk."""
    path = tempfile.mkdtemp(prefix="siesta-js-root-")
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    finally:
        os.rmdir(path)


def _unshare(flags: int) -> None:
    if libc().unshare(flags) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare: {os.strerror(error)}")


def _set_parent_death_signal() -> None:
    libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _clone_in_new_pid_namespace() -> int:
    """``fork`` into a new PID namespace: the interpreter's own fork hooks around a
    raw ``clone`` (``os.fork`` cannot take flags; a fork then ``unshare`` then a
    second fork costs twice as much)."""
    python = _python()
    python.PyOS_BeforeFork()
    pid = python.syscall(SYS_CLONE[platform.machine()], CLONE_NEWPID | signal.SIGCHLD, 0, 0, 0, 0)
    error = ctypes.get_errno()
    if pid == 0:
        python.PyOS_AfterFork_Child()
    else:
        python.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(error, f"clone: {os.strerror(error)}")
    return int(pid)


def _has_capability(bit: int) -> bool:
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    return False


@cache
def _python() -> ctypes.PyDLL:
    """The process's own symbols, called with the GIL held (a raw clone must not
    let another thread run between the fork hooks)."""
    python = ctypes.PyDLL(None, use_errno=True)
    python.syscall.restype = ctypes.c_long
    python.syscall.argtypes = (ctypes.c_long,) * 6
    return python
