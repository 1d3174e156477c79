"""``siesta-runtime config check``: unknown ``SIESTA_`` names with the nearest
setting, invalid settings named, the effective configuration with secrets masked."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from cli.config_check import check, effective, known_variables, warn_unknown
from tests.helpers import REPO

TOKEN = "a-token-of-sixteen-characters-or-more"


def test_a_clean_environment_passes_and_shows_every_setting() -> None:
    report = check({"SIESTA_API_TOKEN": TOKEN, "SIESTA_COMMAND__MAX_TIMEOUT_SECONDS": "300"})
    assert report.ok and report.lines() == [] and report.settings is not None
    shown = effective(report.settings)
    assert "SIESTA_COMMAND__MAX_TIMEOUT_SECONDS=300" in shown
    assert "SIESTA_API_TOKEN=**********" in shown and not any(TOKEN in line for line in shown)
    assert "SIESTA_STORE__TYPE=sqlite" in shown


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("SIESTA_API_TOKN", "SIESTA_API_TOKEN"),
        ("SIESTA_COMANDS__MAX_TIMEOUT_SECONDS", "SIESTA_COMMAND__MAX_TIMEOUT_SECONDS"),
        ("SIESTA_CATALOG_PATH", "SIESTA_IMAGES__CATALOG_PATH"),  # its section left out
        ("SIESTA_HTTP__SSE_KEEPALIVE", "SIESTA_HTTP__SSE_KEEPALIVE_SECONDS"),
        ("SIESTA_NOTHING_LIKE_IT_AT_ALL", None),
    ],
)
def test_an_unknown_name_is_named_with_the_nearest_setting(name: str, nearest: str | None) -> None:
    report = check({name: "1"})
    assert report.unknown == {name: nearest} and not report.ok
    hint = f"did you mean {nearest}?" if nearest else "no setting has this name"
    assert hint in report.lines()[0]


def test_an_unknown_nested_name_does_not_hide_the_rest() -> None:
    # Settings alone refuse it as "Extra inputs are not permitted"; the check names
    # it, and still shows the configuration the other variables make.
    report = check({"SIESTA_COMMAND__TIMEOUT": "5", "SIESTA_COMMAND__DEFAULT_TIMEOUT_SECONDS": "9"})
    assert list(report.unknown) == ["SIESTA_COMMAND__TIMEOUT"] and report.problems == []
    assert report.settings is not None and report.settings.command.default_timeout_seconds == 9


def test_names_read_elsewhere_and_mapping_keys_are_known() -> None:
    env = {
        "SIESTA_URL": "http://127.0.0.1:8080",  # the client's
        "SIESTA_GVISOR": "1",  # the setup script's
        "SIESTA_MCP_ORG": "acme",  # siesta-runtime mcp's options
        "SIESTA_STORE__URL": "redis://r:6379/0",  # a tagged union's member
        "SIESTA_PROVIDER__NAMESPACE": "sandboxes",
        "SIESTA_PROVIDER__TYPE": "kubernetes",
        "siesta_debug": "true",  # any case, as the settings read it
    }
    assert check(env).unknown == {}
    names, prefixes = known_variables()
    assert {"SIESTA_AGENTS__GATEWAY__BACKEND_URL", "SIESTA_STORE__PATH"} <= names
    assert "SIESTA_TOOLS__ORG_POLICIES__" in prefixes


def test_invalid_values_are_named_and_secrets_in_urls_masked() -> None:
    bad = check({"SIESTA_HTTP__PORT": "0", "SIESTA_API_TOKEN": "short"})
    assert bad.settings is None and not bad.ok
    assert {line.split(":")[0] for line in bad.problems} == {
        "SIESTA_HTTP__PORT",
        "SIESTA_API_TOKEN",
    }
    redis = check({"SIESTA_STORE__URL": "redis://:hunter2@redis:6379/0"})
    assert redis.settings is not None
    shown = effective(redis.settings)
    assert "SIESTA_STORE__URL=redis://:**********@redis:6379/0" in shown
    assert not any("hunter2" in line for line in shown)


def test_the_check_leaves_the_process_environment_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIESTA_DATA_DIR", "/elsewhere")
    report = check({"SIESTA_DATA_DIR": "/checked"})
    assert report.settings is not None and str(report.settings.data_dir) == "/checked"
    assert os.environ["SIESTA_DATA_DIR"] == "/elsewhere"


def test_serve_warns_of_unknown_names(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SIESTA_API_TOKN", TOKEN)
    with caplog.at_level(logging.WARNING):
        warn_unknown(logging.getLogger("test"))
    assert "SIESTA_API_TOKN: no setting has this name; did you mean SIESTA_API_TOKEN?" in (
        caplog.messages
    )


def test_the_command_exits_2_on_a_problem_and_prints_the_configuration() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("SIESTA_")}

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "cli.main", "config", "check"]
        env = {**clean, "PYTHONPATH": str(REPO), **env}
        return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)

    good = run(SIESTA_API_TOKEN=TOKEN)
    assert good.returncode == 0, good.stderr
    assert "SIESTA_API_TOKEN=**********" in good.stdout.splitlines() and TOKEN not in good.stdout
    typo = run(SIESTA_API_TOKEN=TOKEN, SIESTA_LEASE__WAIT_SECOND="5")
    assert typo.returncode == 2
    assert typo.stderr == (
        "error: SIESTA_LEASE__WAIT_SECOND: no setting has this name; "
        "did you mean SIESTA_LEASE__WAIT_SECONDS?\n"
    )
    assert "SIESTA_LEASE__WAIT_SECONDS=30.0" in typo.stdout
