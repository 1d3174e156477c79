"""The process functions: start a background process, read it, write its input, stop
it (MCP tools; the catalog's sandbox functions stay the reference's five).

The same processes as ``/v1/conversations/{id}/sandbox/processes``: results are its
``ProcessPublic``. Optional fields take ``null`` (what a model in strict mode sends).
"""

from __future__ import annotations

from pydantic import Field

from siesta_contract.base import Arguments
from siesta_contract.processes import MAX_TIMEOUT_SECONDS, ProcessUser, Signal
from siesta_contract.text import NON_BLANK_TEXT

MAX_WAIT_SECONDS = 30
"""The longest ``readProcess`` waits for a process to end."""


class StartProcessFunctionArgs(Arguments):
    command: str = Field(
        pattern=NON_BLANK_TEXT,
        max_length=65536,
        description="The command, run by `bash -lc`; it goes on after this call",
    )
    cwd: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="Where it starts (default /mnt/work; relative: to the user's home)",
    )
    env: dict[str, str] | None = Field(None, description="Environment variables to add")
    user: ProcessUser | None = Field(None, description="A user of the sandbox (default root)")
    tag: str | None = Field(
        None, min_length=1, max_length=128, description="A name to recognise it by"
    )
    stdin: bool | None = Field(
        None, description="Whether it reads what writeProcessInput sends (default false)"
    )
    timeoutSeconds: int | None = Field(
        None,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description="Killed this long after it starts (default: never; at most 30 days)",
    )


class ProcessArgs(Arguments):
    pid: int = Field(ge=1, le=2**31 - 1, description="The pid startProcess returned")


class ReadProcessArgs(ProcessArgs):
    waitSeconds: float | None = Field(
        None,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="If it is running, wait up to this long for it to end first (default 0)",
    )


class WriteProcessInputArgs(ProcessArgs):
    data: str = Field(max_length=1024 * 1024, description="Text to write to its stdin")
    eof: bool | None = Field(None, description="Close its stdin after data (default false)")


class StopProcessArgs(ProcessArgs):
    signal: Signal | None = Field(
        None, description="Sent to its whole process group (default SIGTERM)"
    )
