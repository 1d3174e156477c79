"""Test-only: run a Python snippet inside a JS worker's jail, as if V8 were broken.

    python -m tests.jail_probe MODE SNIPPET

stands in for the template: builds the jail of ``MODE`` (``full`` or
``unprivileged``) exactly as ``zygote.py`` does, spawns one worker, locks it in
with ``Jail.enter``/``Jail.lock``, then runs ``SNIPPET`` with ``report(text)``,
which writes to the reply pipe (the one thing a jailed worker may write). It
prints one JSON line: ``{"signal": N | null, "exit": N | null, "reports": [...]}``.
A snippet cannot import anything new once jailed (nothing can be opened), so the
modules it may use are imported here first.
"""

from __future__ import annotations

import ctypes  # for snippets, imported before the jail
import json
import os
import resource
import signal
import socket
import sys

from runtime.jsexec.jail import Jail, JailSpec

SPEC = {"uid": 64200, "cpu_seconds": 2, "memory_margin_bytes": 256 * 1024 * 1024}


def main(mode: str, snippet: str) -> int:
    jail = Jail(JailSpec(mode=mode, **SPEC))  # type: ignore[arg-type]
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    pid = jail.spawn()
    if pid == 0:
        os.close(request_w)
        os.close(reply_r)
        _, reply = jail.enter(request_r, reply_w)
        jail.lock()

        def report(text: object) -> None:
            data = str(text).encode()[:4000]
            os.write(reply, len(data).to_bytes(4, "big") + data)

        exec(snippet, {"report": report, **_preloaded()})  # the point of a probe
        os._exit(0)
    os.close(request_r)
    os.close(reply_w)
    reports = _reports(reply_r)
    status = os.waitpid(pid, 0)[1]
    print(
        json.dumps(
            {
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                "reports": reports,
            }
        )
    )
    return 0


def _preloaded() -> dict[str, object]:

    return {"os": os, "ctypes": ctypes, "socket": socket, "resource": resource, "signal": signal}


def _reports(fd: int) -> list[str]:
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    reports = []
    while len(data) >= 4:
        size = int.from_bytes(data[:4], "big")
        reports.append(data[4 : 4 + size].decode(errors="replace"))
        data = data[4 + size :]
    return reports


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
