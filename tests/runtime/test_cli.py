"""``siesta-runtime serve``: the token on first run, and refusing to run without one;
``tokens hash``, and serving with scoped tokens alone."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO, ServiceProcess, free_port, run_cli, spawn_service, tokens_setting


def environment(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIESTA_")}
    return {**env, "SIESTA_DATA_DIR": str(data_dir), "SIESTA_PROVIDER__TYPE": "fake"}


def serve(data_dir: Path, *args: str) -> ServiceProcess:
    return spawn_service(data_dir, environment(data_dir), args=args)


def images_status(service: ServiceProcess, token: str) -> int:
    auth = {"Authorization": f"Bearer {token}"}
    return service.client.get("/v1/images", headers=auth).status_code


def test_first_run_creates_a_private_random_token_and_later_runs_reuse_it(tmp_path: Path) -> None:
    first = serve(tmp_path, "--create-token")
    try:
        token_file = tmp_path / "api-token"
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert token in first.log()
        assert images_status(first, token) == 200
        assert images_status(first, token + "x") == 401
    finally:
        first.stop()
    second = serve(tmp_path, "--create-token")
    try:
        assert images_status(second, token) == 200
    finally:
        second.stop()


def test_serve_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    result = run_cli("serve", "--port", str(free_port()), env=environment(tmp_path))
    assert result.returncode == 2
    assert "SIESTA_API_TOKEN or SIESTA_TOKENS is required" in result.stderr
    assert not (tmp_path / "api-token").exists()


def test_tokens_differ_between_deployments(tmp_path: Path) -> None:
    tokens = []
    for name in ("a", "b"):
        service = serve(tmp_path / name, "--create-token")
        service.stop()
        tokens.append((tmp_path / name / "api-token").read_text())
    assert tokens[0] != tokens[1]


def test_serve_refuses_an_unknown_store_scheme(tmp_path: Path) -> None:
    env = {
        **environment(tmp_path),
        "SIESTA_API_TOKEN": "x" * 20,
        "SIESTA_STORE__URL": "mysql://db/siesta",
    }
    result = run_cli("serve", "--port", str(free_port()), env=env)
    assert result.returncode == 2
    assert "scheme 'mysql' is not supported" in result.stderr


def test_serve_names_the_missing_setting_of_an_incomplete_gateway(tmp_path: Path) -> None:
    env = {
        **environment(tmp_path),
        "SIESTA_API_TOKEN": "x" * 20,
        "SIESTA_AGENTS__GATEWAY": "http",  # and no backend URL
    }
    result = run_cli("serve", "--port", str(free_port()), env=env)
    assert result.returncode == 2
    assert "SIESTA_AGENTS__GATEWAY__BACKEND_URL: Field required" in result.stderr


def hash_from_stdin(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "tokens", "hash"],
        cwd=REPO,
        env={"PATH": os.environ["PATH"], "SIESTA_TOKENS": "not json"},  # settings not needed
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tokens_hash_prints_the_digest_of_the_token_on_stdin() -> None:
    token = "a-long-random-token-\u00e9"
    result = hash_from_stdin(token + "\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == hashlib.sha256(token.encode()).hexdigest()
    assert token not in result.stdout + result.stderr


def test_tokens_hash_refuses_a_short_token_and_names_the_limit() -> None:
    result = hash_from_stdin("short\n")
    assert result.returncode == 2
    assert "at least 16 characters (got 5)" in result.stderr and result.stdout == ""


def test_serve_with_scoped_tokens_only(tmp_path: Path) -> None:
    token = "backend-token-" + "x" * 20
    env = {**environment(tmp_path), "SIESTA_TOKENS": tokens_setting(("backend", token, ["tools"]))}
    service = spawn_service(tmp_path, env)
    try:
        allowed = service.client.get(
            "/v1/tools/executions",
            headers={"Authorization": f"Bearer {token}", "X-Siesta-Org": "o"},
        )
        refused = service.client.get(
            "/v1/conversations/c/files",
            headers={"Authorization": f"Bearer {token}", "X-Siesta-Org": "o", "X-Siesta-User": "u"},
        )
        assert allowed.status_code == 200, allowed.text
        assert refused.status_code == 403
        assert refused.json()["error"] == {
            "code": "forbidden_scope",
            "message": "this route needs a token with the 'sandbox' scope; 'backend' lacks it",
            "scope": "sandbox",
            "token": "backend",
        }
        assert '"caller": "backend"' in service.log()
        assert token not in service.log()
    finally:
        service.stop()
