"""A workspace frozen for a snapshot is thawed, even when the thaw after the copy
fails: its watchdog is kept and thaws it later (a frozen workspace hangs every write
in its sandbox). ``fsfreeze`` is a stand-in on ``PATH`` that logs what it is asked and
refuses to thaw while ``stuck`` exists; the watchdog is the real one."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from runtime.providers.docker import snapshots

STAND_IN = """#!/bin/sh
if [ "$1" = --unfreeze ] && [ -e "{folder}/stuck" ]; then
    echo "fsfreeze: $2: unfreeze failed: Device or resource busy" >&2
    exit 1
fi
echo "$1" >> "{folder}/calls"
"""


def test_a_failed_thaw_is_left_to_the_watchdog_which_thaws_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tool = tmp_path / "fsfreeze"
    tool.write_text(STAND_IN.format(folder=tmp_path))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path('/usr/bin')}:{Path('/bin')}")
    monkeypatch.setattr(snapshots, "THAW_AFTER_SECONDS", 1)
    calls = tmp_path / "calls"

    frozen = snapshots._frozen("/mnt/workspace-of-the-test")
    with caplog.at_level(logging.ERROR, logger=snapshots.__name__), frozen:
        (tmp_path / "stuck").touch()  # the thaw after the copy fails (twice)
    assert calls.read_text() == "--freeze\n"
    assert "could not be thawed" in caplog.text

    (tmp_path / "stuck").unlink()
    deadline = time.monotonic() + 30
    while calls.read_text() == "--freeze\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls.read_text() == "--freeze\n--unfreeze\n"  # by the watchdog
