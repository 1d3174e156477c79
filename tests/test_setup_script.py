"""scripts/setup.sh asks before it restarts a Docker engine that has containers, and
names the running ones; a yes (``--yes``, ``SIESTA_SETUP_YES=1``) or an engine that
does not run needs no question. Run over a stand-in ``docker`` and a daemon.json of
the test's own: the machine's engine is never touched."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO

FAKE_DOCKER = """#!/bin/sh
case "$1" in
    info) [ -n "$FAKE_ENGINE" ] ;;
    ps) if [ "$2" = -aq ]; then printf '%s' "$FAKE_CONTAINERS";
        elif [ -n "$FAKE_CONTAINERS" ]; then echo '  web (nginx, Up 2 hours)'; fi ;;
    *) exit 1 ;;
esac
"""


def setup_sh(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``script`` run in bash after sourcing setup.sh (its steps defined, none run)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(0o755)
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SIESTA_", "DOCKER_"))
    }
    environment |= {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "DOCKER_DAEMON_CONFIG": str(tmp_path / "daemon.json"),
        **env,
    }
    return subprocess.run(
        ["bash", "-c", f"source scripts/setup.sh; {script}"],
        cwd=REPO,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_engine_with_containers_is_left_alone_without_a_yes(tmp_path: Path) -> None:
    done = setup_sh(tmp_path, "configure_docker", FAKE_ENGINE="1", FAKE_CONTAINERS="c1\n")
    assert done.returncode == 1
    assert "web (nginx, Up 2 hours)" in done.stderr and "userns-remap" in done.stderr
    assert str(tmp_path / "daemon.json") in done.stderr
    assert "left as it is" in done.stderr and "--yes" in done.stderr
    assert not (tmp_path / "daemon.json").exists()


@pytest.mark.parametrize(
    ("script", "env"),
    [
        ("parse_args --yes; confirm_restart userns-remap", {}),
        ("confirm_restart userns-remap", {"SIESTA_SETUP_YES": "1"}),
    ],
)
def test_a_yes_goes_on(tmp_path: Path, script: str, env: dict[str, str]) -> None:
    done = setup_sh(tmp_path, script, FAKE_ENGINE="1", FAKE_CONTAINERS="c1", **env)
    assert done.returncode == 0, done.stderr
    assert "web (nginx" in done.stderr and "going on" in done.stderr


def test_an_engine_without_containers_needs_no_question(tmp_path: Path) -> None:
    done = setup_sh(tmp_path, "confirm_restart runtimes", FAKE_ENGINE="1", FAKE_CONTAINERS="")
    assert done.returncode == 0 and done.stderr == ""


def test_an_engine_that_does_not_run_is_configured_without_asking(tmp_path: Path) -> None:
    done = setup_sh(tmp_path, "engine_runs() { false; }; configure_docker")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""
    assert json.loads((tmp_path / "daemon.json").read_text())["userns-remap"] == "default"
