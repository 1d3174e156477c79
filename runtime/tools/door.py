"""The door of the programmatic faces: processes, the terminal, the filesystem routes
and E2B's envd run shell commands and change files like ``runCommand`` and
``writeFile`` do, so they pass the same check and leave the same log.

Each such call is an agent function of its own name (``startProcess``,
``openTerminal``, ``makeDirectory``...) that also *follows* the sandbox function it
amounts to: a process start or a terminal runs a shell command (``runCommand``), a
directory made, moved or removed is a file write (``writeFile``), and so on. It runs
under the strictest of the two policies, as the deployment, the org and a registered
agent set them, so an operator's ``runCommand: confirm`` holds whichever face a
command comes through.

A held call (``confirm``) cannot wait on a stream or a WebSocket: it is refused with
``approval_required`` and the approval's id. Once a person approves it, the same
call — same caller, conversation, function and arguments — made again runs, once
(the grant is redeemed atomically across instances); another call waits for its own
approval.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DOOR_FUNCTIONS: Mapping[str, str | None] = {
    "startProcess": "runCommand",
    "writeProcessInput": None,
    "stopProcess": None,
    "openTerminal": "runCommand",
    "makeDirectory": "writeFile",
    "movePath": "writeFile",
    "removePath": "writeFile",
    "uploadFile": "writeFile",
    "setMetadata": "writeFile",
    "downloadFile": "readFile",
    "statPath": "listFiles",
    "listDirectory": "listFiles",
    "watchDirectory": "listFiles",
    "createSnapshot": None,
    "forkSandbox": None,
    "startFromSnapshot": None,
    "setNetworkRules": None,
    "openPort": None,
}
"""Each door function, and the sandbox function whose policy it also obeys. Writing to a
started process's stdin or signalling it obeys its own name's policy only: its start
already passed ``runCommand``'s. Snapshots, forks, network rules and a port's token change
what a sandbox keeps, reaches or serves, not what runs in it: their own names' policies
hold (``SIESTA_TOOLS__FUNCTION_POLICIES='{"forkSandbox": "confirm"}'``)."""

GRANT = "granted"
"""The result of an approved door call: its repeat may run once."""


@dataclass(frozen=True)
class DoorCall:
    """One call at the door: what the log and the approval show of it."""

    function: str
    arguments: dict[str, Any]
    """What the log keeps (a path, a command): never file contents."""
    fingerprint: str
    """The digest of the whole call (contents included): its repeat after an approval
    must be exactly it."""


def door_call(function: str, arguments: Mapping[str, Any], content: bytes = b"") -> DoorCall:
    """``function`` with the arguments the log shows and, for uploads, the content's
    bytes, which only the fingerprint covers."""
    if function not in DOOR_FUNCTIONS:
        msg = f"{function} is not a door function"
        raise ValueError(msg)
    text = json.dumps(arguments, sort_keys=True, default=str).encode()
    digest = hashlib.sha256(function.encode() + b"\0" + text + b"\0")
    digest.update(hashlib.sha256(content).digest())
    return DoorCall(function, dict(arguments), digest.hexdigest())


Redeem = Callable[[str, float], bool]
"""Take the grant of approval ``id`` for ``ttl`` seconds: True for the one caller that
takes it, False for every later one (``Services``: an ``Idempotency-Key`` claim)."""
