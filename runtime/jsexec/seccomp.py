"""A seccomp filter for a JS worker, compiled once by libseccomp, loaded per worker.

The template compiles the filter to classic BPF once (libseccomp resolves names to
numbers for this machine's architecture and adds the architecture check, so a
32-bit or x32 system call is killed too); each worker loads those bytes with one
``prctl`` after ``no_new_privs``. Loading is a copy into the kernel: no lookup,
no compilation on the path of a new worker.

What a worker may do once jailed is what V8 and the interpreter need to run a
script and talk over its two pipes: read the request pipe, write the reply pipe
(and standard error, which is ``/dev/null``), manage its own memory (V8's JIT maps
and protects pages), wait on futexes, read clocks, exit. Calls that name a path
fail with ``ENOENT`` (the interpreter may look for a source line while formatting
a traceback; nothing can be opened anyway). Anything else kills the process:
no ``execve``, ``socket``, ``connect``, ``ptrace``, ``clone``/``fork``, ``kill``,
``open`` that succeeds, ``ioctl``, ``mount``, ``unshare``, ``bpf``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from dataclasses import dataclass
from functools import cache

SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO_BASE = 0x00050000
SCMP_CMP_EQ = 4
SCMP_FLTATR_CTL_NNP = 3  # libseccomp would set no_new_privs itself: the jail does

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

ALWAYS_ALLOWED = (
    # memory: the heap, V8's pages and its JIT (W^X flips are mprotect calls)
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    # time, waiting and identity of itself
    "futex",
    "clock_gettime",
    "clock_getres",
    "clock_nanosleep",
    "gettimeofday",
    "nanosleep",
    "sched_yield",
    "getpid",
    "gettid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getrandom",
    # signals to itself only arrive; it may not send any (no kill, no tgkill)
    "rt_sigreturn",
    "rt_sigprocmask",
    "rt_sigaction",
    "sigaltstack",
    "exit",
    "exit_group",
)

NAMES_FAIL_WITH_ENOENT = (
    "open",
    "openat",
    "openat2",
    "stat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
    "getcwd",
)


class SeccompUnavailable(OSError):
    pass


class _ArgCmp(ctypes.Structure):
    _fields_ = (  # struct scmp_arg_cmp
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


@dataclass(frozen=True)
class Filter:
    """A compiled filter: classic BPF instructions, 8 bytes each."""

    program: bytes

    def load(self) -> None:
        """Apply it to the calling process (which must have no_new_privs set)."""
        buffer = ctypes.create_string_buffer(self.program, len(self.program))
        prog = _SockFprog(len(self.program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
        if libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"seccomp filter not loaded: {os.strerror(error)}")


def compile_filter(read_fd: int, write_fd: int) -> Filter:
    """The worker's filter: reads only from ``read_fd``, writes only to ``write_fd``
    (and standard error)."""
    lib = _libseccomp()
    ctx = lib.seccomp_init(SCMP_ACT_KILL_PROCESS)
    if not ctx:
        msg = "seccomp_init failed"
        raise SeccompUnavailable(msg)
    try:
        _check(lib.seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0), "seccomp_attr_set")
        for name in ALWAYS_ALLOWED:
            _rule(lib, ctx, SCMP_ACT_ALLOW, name)
        for name in NAMES_FAIL_WITH_ENOENT:
            _rule(lib, ctx, SCMP_ACT_ERRNO_BASE | errno.ENOENT, name)
        _rule(lib, ctx, SCMP_ACT_ALLOW, "read", fd=read_fd)
        for fd in (write_fd, 2):
            _rule(lib, ctx, SCMP_ACT_ALLOW, "write", fd=fd)
        return Filter(_export(lib, ctx))
    finally:
        lib.seccomp_release(ctx)


def check_available() -> None:
    """Raise ``SeccompUnavailable`` (saying what to install) when libseccomp is missing."""
    _libseccomp()


def set_no_new_privs() -> None:
    if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"no_new_privs not set: {os.strerror(error)}")


def _rule(lib: ctypes.CDLL, ctx: int, action: int, name: str, *, fd: int | None = None) -> None:
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:  # not a system call on this architecture (e.g. open on arm64)
        return
    if fd is None:
        _check(lib.seccomp_rule_add_array(ctx, action, number, 0, None), name)
        return
    condition = _ArgCmp(0, SCMP_CMP_EQ, fd, 0)
    _check(lib.seccomp_rule_add_array(ctx, action, number, 1, ctypes.byref(condition)), name)


def _export(lib: ctypes.CDLL, ctx: int) -> bytes:
    fd = os.memfd_create("siesta-js-seccomp")
    try:
        _check(lib.seccomp_export_bpf(ctx, fd), "seccomp_export_bpf")
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check(result: int, what: str) -> None:
    if result != 0:
        msg = f"{what}: {os.strerror(-result)}"
        raise SeccompUnavailable(msg)


@cache
def _libseccomp() -> ctypes.CDLL:
    path = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(path, use_errno=True)
    except OSError as error:
        msg = f"libseccomp is not installed ({error}): install libseccomp2"
        raise SeccompUnavailable(msg) from error
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_attr_set.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    )
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    return lib


@cache
def libc() -> ctypes.CDLL:
    """The C library, with the calls the jail makes typed (shared with ``jail.py``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    # prctl is variadic: unsigned long arguments, the unused ones zero (the kernel
    # refuses PR_SET_NO_NEW_PRIVS with garbage in them)
    libc.prctl.argtypes = (ctypes.c_int, *(ctypes.c_ulong,) * 4)
    libc.unshare.argtypes = (ctypes.c_int,)
    return libc
