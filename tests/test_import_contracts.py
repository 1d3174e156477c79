"""The layering contracts (pyproject.toml, ``[tool.importlinter]``) hold, and they bite:
a deliberate back-import into a copy of the tree breaks exactly the contract it should."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = {
    "runtime": REPO / "runtime",
    "api": REPO / "api",
    "cli": REPO / "cli",
    "siesta_client": REPO / "clients" / "python" / "siesta_client",
    "siesta_contract": REPO / "clients" / "python" / "siesta_contract",
}


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contracts, to break on purpose."""
    for package, source in PACKAGES.items():
        shutil.copytree(source, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "back_import", "broken"),
    [
        ("runtime/core/errors.py", "import api.app", "runtime never imports api"),
        ("runtime/seams/providers.py", "import runtime.seams.stores", "Providers know nothing"),
        ("runtime/providers/base.py", "import runtime.store.base", "Providers know nothing"),
        ("runtime/sessions/manager.py", "import runtime.tools.executor", "layer by layer"),
        (
            "runtime/sessions/pool.py",
            "import runtime.files.conversation",
            "runtime, layer by layer",
        ),
        ("runtime/core/context.py", "import runtime.functions.base", "layer by layer"),
        ("runtime/providers/agent/inside.py", "import docker", "know no engine"),
        (
            "runtime/providers/agent/ops.py",
            "import runtime.providers.docker.engine_exec",
            "Providers, layer by layer",
        ),
        (
            "runtime/providers/kubernetes/lifecycle.py",
            "import runtime.providers.docker.lifecycle",
            "never import each other",
        ),
        (
            "runtime/sessions/manager.py",
            "import runtime.providers.kubernetes.provider",
            "see only the two seams",
        ),
        (
            "runtime/sandbox/commands.py",
            "import runtime.providers.agent.inside",
            "see only the two seams",
        ),
        ("api/routes/health.py", "import runtime.store.base", "api never imports runtime.store"),
        # No escape hatch: the composition root reaches the backends, so api may not import it.
        ("api/routes/health.py", "import runtime.wiring", "api never imports runtime.store"),
        (
            "runtime/sandbox/commands.py",
            "import runtime.store.sqlite.db",
            "see only the two seams",
        ),
        (
            "api/console/pages/overview.py",
            "import runtime.providers.base",
            "api never imports runtime.store or runtime.providers",
        ),
        ("siesta_contract/files.py", "import runtime.core.records", "public contract imports"),
        ("siesta_contract/tools.py", "import siesta_client", "public contract imports"),
        ("siesta_client/_ops.py", "import api.routes.tools", "client imports nothing"),
    ],
)
def test_a_back_import_breaks_its_contract(
    tree: Path, module: str, back_import: str, broken: str
) -> None:
    path = tree / module
    # Inside a function, as a lazy import would dodge a contract: it is seen all the same.
    path.write_text(path.read_text() + f"\n\ndef _dodge() -> None:\n    {back_import}\n")
    result = lint(tree)
    assert result.returncode == 1, result.stdout
    assert broken in result.stdout.replace("\n", " ")
