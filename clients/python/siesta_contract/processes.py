"""A conversation's processes that keep running after the call that starts them:
servers, watchers, REPLs (``/v1/conversations/{id}/sandbox/processes``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from siesta_contract.text import NON_BLANK_TEXT

ProcessUser = Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")]
Signal = Literal["SIGTERM", "SIGKILL", "SIGINT", "SIGHUP"]
MAX_TIMEOUT_SECONDS = 30 * 24 * 3600
"""The longest ``timeoutSeconds`` (the sandbox's agent counts a timeout in milliseconds
in 32 bits: about 49 days); no timeout at all is ``null``."""


class StartProcessArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: Annotated[str, StringConstraints(pattern=NON_BLANK_TEXT, max_length=65536)]
    """Run as ``bash -lc command``."""
    cwd: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    """Where it starts (default ``/mnt/work``; relative: to the user's home)."""
    env: dict[str, str] | None = None
    user: ProcessUser | None = None
    """A user of the sandbox's image (default ``root``, as ``runCommand``)."""
    timeoutSeconds: Annotated[int, Field(ge=1, le=MAX_TIMEOUT_SECONDS)] | None = None
    """Killed (SIGTERM, then SIGKILL) this long after it starts; ``null``: it runs until
    it ends, is signalled, or the sandbox ends."""
    tag: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    """A name to find it by besides its pid."""
    stdin: bool = False
    """Whether it reads what ``.../input`` sends (else its stdin is empty)."""


class ProcessPublic(BaseModel):
    pid: int
    """Its pid in the sandbox."""
    tag: str | None
    command: str
    cwd: str | None
    running: bool
    exitCode: int | None
    """``null`` while it runs, or when it was killed by its timeout or the sandbox's end."""
    status: str | None
    """How it ended (``exit status 3``, ``signal: killed``)."""
    recent: dict[str, str]
    """The last 64 KiB of each stream it printed (``stdout``, ``stderr``), as text."""


class ProcessList(BaseModel):
    processes: list[ProcessPublic]
    """Running ones, and the last ones that ended (newest last)."""


class ProcessInputArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: Annotated[str, StringConstraints(max_length=1024 * 1024)] = ""
    """Text to write to its stdin (UTF-8)."""
    eof: bool = False
    """Close its stdin after ``data``."""


class ProcessSignalArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    signal: Signal = "SIGTERM"
    """To its whole process group."""
