"""The stock npm ``e2b`` SDK (JavaScript), unmodified, against the service on Docker:
create, run a command, write and read a file, kill (tests/e2b/node/sdk.mjs)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2b.conftest import E2bService

pytestmark = [pytest.mark.docker]

NODE_TEST = Path(__file__).parent / "node"


def test_the_javascript_sdk_creates_runs_writes_reads_and_kills(e2b: E2bService) -> None:
    done = subprocess.run(
        ["node", "sdk.mjs"],
        cwd=NODE_TEST,
        env={**os.environ, **e2b.environment()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "stdout": "user in /home/user\n",
        "exitError": 4,
        "writtenPath": "/home/user/node/hello.txt",
        "read": "from node ✓",
        "missing": "NotFoundError",
        "metadata": {"from": "node"},
        "running": True,
        "killed": True,
        "runningAfterKill": False,
    }
