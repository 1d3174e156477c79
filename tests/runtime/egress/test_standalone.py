"""The proxy as Kubernetes runs it (``siesta-runtime egress-proxy``), and the service's
side of that arrangement (``SIESTA_EGRESS__PROXY_URL``, and the store both use)."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.core.context import CallContext
from runtime.core.errors import ConfigurationError
from runtime.egress.authority import make_authority
from runtime.egress.build import build_egress
from runtime.egress.credentials import verify
from runtime.egress.service import ProxiedEgress, revoke_credentials
from runtime.settings import Settings
from runtime.store import open_stores
from runtime.wiring import egress_setup
from tests.helpers import REPO, free_port, wait_until

KEY = "standalone-key-0123456789abcdef-xyz"


def test_the_standalone_proxy_checks_credentials_signed_by_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SIESTA_")},
        "SIESTA_EGRESS__KEY": KEY,
        "SIESTA_EGRESS__ALLOW": "allowed.example",
        "SIESTA_EGRESS__PROXY_URL": f"http://localhost:{port}",
        "SIESTA_DATA_DIR": str(tmp_path),
        "SIESTA_EGRESS__REVOCATION_POLL_SECONDS": "0.2",
    }
    proxy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "egress-proxy",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stdout is not None
        ready = json.loads(proxy.stdout.readline())
        assert ready == {"event": "ready", "host": "127.0.0.1", "port": port}
        # The service side: the proxy URL's name resolved once, credentials signed with the key.
        for name in [n for n in os.environ if n.startswith("SIESTA_")]:
            monkeypatch.delenv(name)
        for name, value in env.items():
            if name.startswith("SIESTA_"):
                monkeypatch.setenv(name, value)
        settings = Settings()
        stores = open_stores(settings.store, settings.sqlite_path)
        egress = build_egress(egress_setup(settings), stores.deployment, "dep")
        assert isinstance(egress, ProxiedEgress) and egress.network is None
        environment = egress.environment(CallContext("org-k", "user", "conv-k"))
        url = environment["HTTPS_PROXY"]
        assert url.endswith(f"@127.0.0.1:{port}") and environment["https_proxy"] == url
        user, password = url.removeprefix("http://").split("@")[0].split(":")
        assert verify(KEY.encode(), user, password) is not None

        def ask(host: str) -> str:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                auth = f"Proxy-Authorization: Basic {token}"
                conn.sendall(f"CONNECT {host}:443 HTTP/1.1\r\n{auth}\r\n\r\n".encode())
                return conn.recv(4096).decode()

        assert "not in the egress allowlist" in ask("other.example")
        event = json.loads(proxy.stdout.readline())
        assert (event["event"], event["org"], event["conversation"], event["host"]) == (
            "refused",
            "org-k",
            "conv-k",
            "other.example",
        )
        # Deleting the conversation: the proxy refuses its credentials from its next read.
        revoke_credentials(stores.revocations, settings.egress, "org-k", "conv-k")
        stores.close()
        assert wait_until(lambda: "credentials_revoked" in ask("other.example"))
        assert "407 Proxy Authentication Required" in ask("other.example")
    finally:
        proxy.send_signal(signal.SIGTERM)
        assert proxy.wait(timeout=10) == 0
        if proxy.stdout:
            proxy.stdout.close()


def test_with_secrets_both_sides_need_the_authority_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy run apart and the service must share one authority: made in each one's
    own data folder, the sandboxes would trust the service's and meet the proxy's."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SIESTA_")},
        "SIESTA_EGRESS__KEY": KEY,
        "SIESTA_EGRESS__ALLOW": "allowed.example",
        "SIESTA_EGRESS__SECRETS_KEY": "secrets-" + KEY,
        "SIESTA_EGRESS__PROXY_URL": "http://localhost:3128",
        "SIESTA_DATA_DIR": str(tmp_path),
    }
    proxy = subprocess.run(
        [sys.executable, "-m", "cli.main", "egress-proxy", "--port", str(free_port())],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proxy.returncode != 0
    assert "SIESTA_EGRESS__CA_CERT_FILE" in proxy.stdout + proxy.stderr
    for name in [n for n in os.environ if n.startswith("SIESTA_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        if name.startswith("SIESTA_"):
            monkeypatch.setenv(name, value)
    settings = Settings()
    stores = open_stores(settings.store, settings.sqlite_path)
    with pytest.raises(ConfigurationError, match="SIESTA_EGRESS__CA_CERT_FILE"):
        build_egress(egress_setup(settings), stores.deployment, "dep")
    stores.close()

    # With the files, the proxy starts; the service hands their certificate to sandboxes.
    authority = make_authority()
    (tmp_path / "ca.crt").write_text(authority.cert)
    (tmp_path / "ca.key").write_text(authority.key)
    files = {
        "SIESTA_EGRESS__CA_CERT_FILE": str(tmp_path / "ca.crt"),
        "SIESTA_EGRESS__CA_KEY_FILE": str(tmp_path / "ca.key"),
    }
    port = free_port()
    started = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "egress-proxy",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env={**env, **files},
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert started.stdout is not None
        assert json.loads(started.stdout.readline())["event"] == "ready"
    finally:
        started.send_signal(signal.SIGTERM)
        started.communicate(timeout=30)  # reads to the end and closes its stdout
    for name, value in files.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    stores = open_stores(settings.store, settings.sqlite_path)
    egress = build_egress(egress_setup(settings), stores.deployment, "dep")
    assert egress.trust_pem() == authority.cert
    stores.close()
