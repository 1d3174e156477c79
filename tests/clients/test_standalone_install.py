"""``pip install ./clients/python`` into a clean virtual environment stands alone.

It brings httpx, httpx-ws (a terminal's WebSocket), pydantic, their own
dependencies and the client's two packages (``siesta_client`` and the public
contract, ``siesta_contract``), and nothing of
the server: no FastAPI, Docker, Redis, Kubernetes, V8, uvloop, no top-level
``runtime`` or ``api``. The client is built from a copy of its folder, so that it
cannot lean on anything else in this repository. Needs the package index (pip's
cache makes a second run quick).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow

ALLOWED = {
    "siesta-client",
    "httpx",
    "httpx-ws",
    "pydantic",
    # What httpx, httpx-ws and pydantic bring themselves.
    "annotated-types",
    "anyio",
    "certifi",
    "exceptiongroup",
    "h11",
    "httpcore",
    "idna",
    "pydantic-core",
    "sniffio",
    "typing-extensions",
    "typing-inspection",
    "wsproto",
}
"""Every distribution the client may bring (pip's own are left out by ``pip freeze``)."""
SERVER_ONLY = {"siesta-runtime", "fastapi", "starlette", "docker", "redis", "kubernetes"}
SERVER_ONLY |= {"stpyv8", "uvloop", "uvicorn", "mcp", "pyyaml", "prometheus-client"}
IMPORT_AND_BUILD = """
import importlib, importlib.util, json, pkgutil
import siesta_client, siesta_contract
found = pkgutil.walk_packages(siesta_contract.__path__, "siesta_contract.")
modules = [info.name for info in found]
for name in modules:
    importlib.import_module(name)
client = siesta_client.SiestaClient("http://127.0.0.1:9", "token")
conversation = client.conversation("conv-1", org="org-a", user="user-1")
client.close()
print(json.dumps({
    "modules": modules,
    "conversation": type(conversation).__name__,
    "server": [name for name in ("runtime", "api", "cli") if importlib.util.find_spec(name)],
}))
"""


def test_the_client_installs_and_imports_without_the_server(tmp_path: Path) -> None:
    source = tmp_path / "client"
    shutil.copytree(
        REPO / "clients" / "python",
        source,
        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"),
    )
    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")
    python = str(tmp_path / "venv" / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    install = subprocess.run(
        [*pip, "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    frozen = subprocess.run(
        [*pip, "freeze", "--all"], capture_output=True, text=True, check=True
    ).stdout
    installed = {_name(line) for line in frozen.splitlines() if line.strip()}
    installed -= {"pip", "setuptools", "wheel"}  # the environment's own tools
    assert {"siesta-client", "httpx", "pydantic"} <= installed
    assert installed <= ALLOWED, f"not allowed: {sorted(installed - ALLOWED)}"
    assert not installed & SERVER_ONLY

    # Run from the environment's folder: nothing of this repository is on the path.
    imported = subprocess.run(
        [python, "-c", IMPORT_AND_BUILD],
        cwd=tmp_path / "venv",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    found = json.loads(imported.stdout)
    assert found["conversation"] == "Conversation"
    assert "siesta_contract.functions.sandbox" in found["modules"]
    assert found["server"] == [], "a server package is importable"


def _name(requirement: str) -> str:
    """A ``pip freeze`` line's distribution name, normalised (``Foo_Bar==1`` → ``foo-bar``)."""
    for separator in ("==", " @ ", "==="):
        requirement = requirement.split(separator)[0]
    return requirement.strip().lower().replace("_", "-").replace(".", "-")
