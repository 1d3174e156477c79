"""Reads and writes anywhere in a sandbox, as one of its users: small shell programs.

E2B's files (``/e2b/envd``) and ``/v1``'s file system calls name paths anywhere in
the sandbox (``/home/user/a.txt``; relative ones are relative to the user's home,
or to the workspace on ``/v1``), so they cannot go through ``siesta-fs``, which
keeps to the workspace. Running ``cat`` as the call's user through the agent
instead leaves it to the kernel what that user may touch: never a host path,
nothing the user could not reach with a command of its own. Files written are
the user's. The exit code of each program says what went wrong.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from runtime.core.context import CallContext
from runtime.core.errors import (
    FileMissing,
    InvalidRequest,
    NotADirectory,
    NotAFile,
    SiestaError,
    TransferTooLarge,
    WorkspaceError,
)
from runtime.core.output import HeadTailBuffer
from runtime.sandbox import metadata
from runtime.sandbox.metadata import HELPER, MetadataLimits
from runtime.sandbox.processes import as_user
from runtime.seams.providers import ProcessSpec, RunningProcess, SandboxInside
from runtime.sessions.manager import SessionManager

READ = 'test -e "$1" || exit 3; test -d "$1" && exit 4; exec cat -- "$1"'
WRITE = (
    'f=$1; b=$2; k=$3; shift 3; d=$(dirname -- "$f"); mkdir -p -- "$d" || exit 5; '
    'test -d "$f" && exit 4; '
    ': > "$f" || exit 6; chown -- "$(id -u):$(id -g)" "$f" 2>/dev/null; '
    f'cat >> "$f" || exit 6; {HELPER} setmeta "$f" "$@" || exit; '
    f'{HELPER} getmeta "$f" "$b" "$k" 2>/dev/null; cd -- "$d" && pwd'
)
"""Both run where ``AsUser`` says (``as_user``); WRITE prints the file's metadata as it
reads back (``siesta-fs getmeta``), then its folder. It writes as envd does: create (or
empty) the file, give it to the user, write, then replace its metadata (an overwrite
without metadata clears what the file had), so a watcher sees what E2B's shows for a
write: create, chmod, write. Metadata that cannot be written (a full disk, a user who
may not) fails the write, as envd's does; a file system without xattrs keeps none."""
STDERR_KEPT = 2048
FOLDER_BYTES = 8192
"""What WRITE prints after the metadata: the file's folder, a path."""


class PermissionRefused(InvalidRequest):
    code = "permission_denied"


class UnknownUser(SiestaError):
    code = "unknown_user"


class NoSpaceLeft(SiestaError):
    code = "not_enough_space"


class FileOperationFailed(WorkspaceError):
    """A valid request the sandbox's state refused (a mount point to remove, a folder
    onto a file, a read-only file system): what the sandbox said is in the message."""

    code = "file_operation_failed"


@dataclass(frozen=True)
class AsUser:
    """Where a file operation runs: the conversation's sandbox, as ``user``, with
    relative paths relative to ``cwd`` (``None``: the user's home)."""

    ctx: CallContext
    user: str
    cwd: str | None = None


@dataclass(frozen=True)
class Written:
    name: str
    path: str
    metadata: dict[str, str]
    """As the file has it now (none where its file system keeps no xattrs)."""


class UserFiles:
    def __init__(
        self,
        sessions: SessionManager,
        inside: SandboxInside,
        grace_seconds: int,
        metadata_limits: MetadataLimits,
    ) -> None:
        self._sessions = sessions
        self._inside = inside
        self._grace = grace_seconds
        self.metadata_limits = metadata_limits

    @contextlib.contextmanager
    def _program(
        self, who: AsUser, script: str, *args: str, stdin: bool = False
    ) -> Iterator[RunningProcess]:
        """``start_program`` for the block; a block that fails ends the program."""
        process = self.start_program(who, script, *args, stdin=stdin)
        try:
            yield process
        except BaseException:
            process.kill()
            process.close()
            raise

    def start_program(
        self,
        who: AsUser,
        script: str,
        *args: str,
        stdin: bool = False,
        kept: tuple[int, str] | None = None,
    ) -> RunningProcess:
        """``script`` with ``args`` as ``who.user`` in ``who.cwd``. The conversation's
        lease is held only to start it: a long transfer or a watch never keeps the
        sandbox's other calls waiting. ``kept``: (ring bytes, tag) in the sandbox's
        process table (a watcher); otherwise its output is kept nowhere but here."""
        argv = as_user(who.user, who.cwd, {}, ["/bin/sh", "-c", script, "sh", *args])
        ring, tag = kept if kept is not None else (0, "")
        spec = ProcessSpec(argv, 0, 0, self._grace, stdin=stdin, ring_bytes=ring, tag=tag)
        with self._sessions.operation(who.ctx) as session:
            return self._inside.start_process(session.record.sandbox_id, spec)

    def read(self, who: AsUser, path: str, on_chunk: Callable[[bytes], None]) -> None:
        """The file's bytes to ``on_chunk`` as they are read."""
        stderr = HeadTailBuffer(STDERR_KEPT)
        with self._program(who, READ, path) as process:
            result = process.wait(
                lambda stream, data: on_chunk(data) if stream == "stdout" else stderr.write(data)
            )
        check_exit(result.exit_code, stderr.result().text, path)

    def write(
        self,
        who: AsUser,
        path: str,
        chunks: Callable[[], bytes | None],
        file_metadata: dict[str, str] | None = None,
    ) -> Written:
        """Replace (or create, with its folders) the file with what ``chunks`` returns
        until it returns ``None``; its metadata replaced by ``file_metadata`` (checked
        against the limits before anything is written)."""
        limits = self.metadata_limits
        pairs = metadata.pairs(file_metadata or {})
        metadata.check(file_metadata or {}, limits)
        kept = limits.encoded_bytes + FOLDER_BYTES
        stdout, stderr = bytearray(), HeadTailBuffer(STDERR_KEPT)

        def output(stream: str, data: bytes) -> None:
            if stream == "stdout":
                stdout.extend(data[: max(0, kept - len(stdout))])
            else:
                stderr.write(data)

        args = (path, str(limits.max_bytes), str(limits.max_keys), *pairs)
        with self._program(who, WRITE, *args, stdin=True) as process:
            while (chunk := chunks()) is not None:
                if chunk:
                    process.write(chunk)
            process.close_input()
            result = process.wait(output)
        check_exit(result.exit_code, stderr.result().text, path)
        encoded, _, rest = bytes(stdout).partition(b"\0")
        folder = rest.decode(errors="replace").strip()
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return Written(
            name=name, path=f"{folder.rstrip('/')}/{name}", metadata=metadata.decode(encoded)
        )

    def run_script(
        self,
        who: AsUser,
        script: str,
        *args: str,
        limit: int,
        max_records: int | None = None,
        stdin: bytes | None = None,
    ) -> tuple[int, bytes, str]:
        """(exit code, stdout, stderr) of ``script`` with ``args`` (and ``stdin``) as
        ``who``; more than ``limit`` bytes of stdout, or more than ``max_records``
        NUL-ended records, is ``TransferTooLarge`` (with ``limit`` and ``unit``), raised
        as soon as it comes: what the sandbox prints is bounded before it is kept."""
        stdout, stderr = bytearray(), HeadTailBuffer(STDERR_KEPT)
        records = 0

        def output(stream: str, data: bytes) -> None:
            nonlocal records
            if stream != "stdout":
                stderr.write(data)
                return
            stdout.extend(data)
            records += data.count(b"\0")
            if len(stdout) > limit:
                msg = f"the listing is over {limit} bytes"
                raise TransferTooLarge(msg, limit=limit, unit="bytes")
            if max_records is not None and records > max_records:
                msg = f"the listing has over {max_records} entries"
                raise TransferTooLarge(msg, limit=max_records, unit="entries")

        with self._program(who, script, *args, stdin=stdin is not None) as process:
            if stdin is not None:
                process.write(stdin)
                process.close_input()
            result = process.wait(output)
        return result.exit_code, bytes(stdout), stderr.result().text


def check_exit(exit_code: int, stderr: str, path: str) -> None:
    """The error a file program's exit code (or its stderr) stands for."""
    if exit_code == 0:
        return
    if stderr.startswith("setpriv:"):
        msg = f"the sandbox cannot run as that user: {stderr.strip()[-300:]}"
        raise UnknownUser(msg)
    if exit_code == 3:
        msg = f"file {path!r} does not exist"
        raise FileMissing(msg, path=path)
    if exit_code == 4:
        msg = f"{path!r} is a directory"
        raise NotAFile(msg, path=path, type="directory")
    if "No space left" in stderr or "Disk quota" in stderr:
        msg = f"no space left for {path!r}: {stderr.strip()[-300:]}"
        raise NoSpaceLeft(msg, path=path)
    if "Not a directory" in stderr:
        msg = f"{path!r}: {stderr.strip()[-300:]}"
        raise NotADirectory(msg, path=path)
    if "Permission denied" in stderr or "Operation not permitted" in stderr:
        msg = f"{path!r}: {stderr.strip()[-300:]}"
        raise PermissionRefused(msg, path=path)
    detail = stderr.strip()[-300:] or f"exit code {exit_code}"
    msg = f"{path!r}: {detail}"
    raise FileOperationFailed(msg, path=path)
