"""The manual (docs/, README.md): it builds strict, its generated references hold
everything the code has, the README links only to pages that exist, and every code
example runs (tests/docs_examples.py: the markers that say how).

The
Python examples of one page run in order in one namespace (a later block uses what an
earlier one made), which starts with ``siesta`` (a client of the service), ``token``,
``agent`` and ``user`` (the wire forms of the tool catalog's example). The shell
examples run in bash with ``TOKEN`` set, and ``APPROVER`` and ``ADMIN_TOKEN``: tokens
of the service with only the ``approve`` and the ``admin`` scope. The E2B SDK's
examples need processes in a sandbox, so they run against a service on Docker (and
so do those marked ``run on docker``). Both run in a folder whose
``.siesta/api-token`` is the service's token, ``http://127.0.0.1:8080`` replaced by
the service's address.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import types
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli.config_check import OTHER_PREFIXES, OTHER_VARIABLES
from runtime.core.auth import token_digest
from siesta_client import SiestaClient
from tests.docs_examples import REFERENCE, Example, examples, manual_pages
from tests.helpers import (
    REPO,
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    TOKEN,
    ServiceProcess,
    StartService,
    free_port,
    wait_until,
)

GENERATOR = REPO / "scripts" / "docs_reference.py"
DEFAULT_URL = "http://127.0.0.1:8080"
AGENT = {
    "id": "a1",
    "systemToolIds": ["sandbox", "js_executor"],
    "baseImage": "debian-base",
    "model": {"provider": "openai", "name": "gpt-4.1"},
    "subAgents": [],
    "functionPolicies": {"runCommand": "confirm"},
    "connections": [],
}
USER = {"id": "u1", "role": "User"}


APPROVER = f"approver-{TEST_RUN_ID}"
ADMIN_TOKEN = f"admin-{TEST_RUN_ID}"
TOKENS = json.dumps(
    [
        {"name": "approver", "sha256": token_digest(APPROVER), "scopes": ["approve"]},
        {"name": "admin", "sha256": token_digest(ADMIN_TOKEN), "scopes": ["admin"]},
    ]
)
SERVED_PORTS = (8080, 8081, 6379)
"""The ports a serving example names, each replaced by a free one: the services'
(8080, 8081), Redis' (6379)."""
SERVES_SECONDS = 180
"""How long a serving example may take to answer (``make run`` sets up first)."""

EXAMPLES = examples()
RUNNABLE = [example for example in EXAMPLES if example.marker in ("run", "run on docker")]
SERVING = [example for example in EXAMPLES if example.marker == "serves"]
RUN_BY_TESTS = [example for example in EXAMPLES if example.marker == "run by"]


@pytest.fixture(scope="module")
def reference() -> Path:
    """docs/reference/, generated now."""
    subprocess.run([sys.executable, str(GENERATOR)], check=True, capture_output=True)
    return REFERENCE


def build(folder: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # Never -q: MkDocs then drops its warnings before strict mode counts them.
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=folder,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_site_builds_strict(reference: Path, tmp_path: Path) -> None:
    result = build(REPO, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "reference" / "settings.html").exists()


BROKEN = {
    "[a page](concepts/no-such-page.md)": "the target is not found",
    "[an anchor](concepts/lifecycle.md#no-such-anchor)": "does not contain an anchor",
    "[an anchor here](#no-such-anchor)": "there is no such anchor on this page",
}


def test_a_broken_link_or_anchor_fails_the_build(reference: Path, tmp_path: Path) -> None:
    shutil.copy(REPO / "mkdocs.yml", tmp_path)
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    with (tmp_path / "docs" / "index.md").open("a") as index:
        index.write("".join(f"\nSee {link}.\n" for link in BROKEN))
    result = build(tmp_path, tmp_path / "site")
    assert result.returncode != 0
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    for link, complaint in BROKEN.items():
        target = link.split("(")[1].rstrip(")")
        assert any(target in line and complaint in line for line in warnings), link


def test_the_readme_is_a_landing_page_linking_pages_that_exist(reference: Path) -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing


def test_the_settings_reference_holds_every_setting_the_docs_name(reference: Path) -> None:
    listed = set(re.findall(r"^\| `(SIESTA_\w+)`", (reference / "settings.md").read_text(), re.M))
    from runtime.settings import Settings

    for name in (f"SIESTA_{field.upper()}" for field in Settings.model_fields):
        assert name in listed or any(item.startswith(name + "__") for item in listed)
    named = {
        name
        for page in manual_pages()
        for name in re.findall(r"\b(SIESTA_[A-Z0-9_]*[A-Z0-9])\b(?![*_])", page.read_text())
        if not name.endswith("__")
    }
    unknown = {
        name
        for name in named - listed - OTHER_VARIABLES - GATEWAY_SHORT_FORM - MISTAKES_SHOWN
        if not name.startswith(OTHER_PREFIXES)
    }
    assert not sorted(unknown)


MISTAKES_SHOWN = {"SIESTA_CATALOG_PATH", "SIESTA_COMMAND__TIMEOUT"}
"""What `siesta-runtime config check` refuses, as the configuration guide shows it."""
GATEWAY_SHORT_FORM = {"SIESTA_AGENTS__GATEWAY", "SIESTA_AGENTS__BACKEND_URL"}
"""The gateway's short form, still read (runtime/agents/settings.py, ``_flat_gateway``)."""


def test_the_metrics_reference_holds_every_metric(reference: Path) -> None:
    from runtime.core.metrics import REGISTRY

    page = (reference / "metrics.md").read_text()
    listed = set(re.findall(r"^\| `([a-z]\w+)`", page, re.M))
    exposed = {family.name for family in REGISTRY.collect()}
    assert {name.removesuffix("_total") for name in listed} >= exposed
    named = {
        name
        for page in manual_pages()
        for name in re.findall(r"\b(siesta_[a-z_]+[a-z])\b", page.read_text())
    }
    series = {name for name in named if re.sub(r"_(bucket|count|sum)$", "", name) in listed}
    assert not sorted(named - listed - series - NOT_METRICS)


NOT_METRICS = {"siesta_client", "siesta_contract", "siesta_console"}
NOT_METRICS |= {"siesta_help", "siesta_help_resolve"}  # functions of the tool catalog
"""Names the manual gives that are packages or functions, not metrics."""


def test_the_errors_reference_holds_every_code(reference: Path) -> None:
    from api.errors import STATUS_BY_CODE
    from runtime.core.errors import SiestaError

    listed = set(re.findall(r"^\| `(\w+)` \| \d+", (reference / "errors.md").read_text(), re.M))
    classes: list[type[SiestaError]] = [SiestaError]
    codes = set(STATUS_BY_CODE)
    while classes:
        klass = classes.pop()
        codes.add(klass.code)
        classes += klass.__subclasses__()
    assert codes <= listed


def test_every_example_is_marked() -> None:
    unmarked = [example.id for example in EXAMPLES if example.marker is None]
    unexplained = [e.id for e in EXAMPLES if e.marker == "not-run" and not e.reason]
    assert not unmarked, "mark each: <!-- example: run --> or <!-- example: not-run (why) -->"
    assert not unexplained
    assert len(RUNNABLE) >= 10


@pytest.mark.parametrize("example", RUN_BY_TESTS, ids=[example.id for example in RUN_BY_TESTS])
def test_an_example_run_by_another_test_is_read_from_its_page_there(example: Example) -> None:
    """That test runs the page's block (``docs_example``), not a copy of it."""
    assert example.by is not None
    source = (REPO / example.by).read_text()
    page = str(example.page.relative_to(REPO))
    literals = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert page in literals and "docs_example(" in source
    assert any(len(text) >= 10 and example.code.startswith(text) for text in literals)


def checked(code: str, name: str) -> types.CodeType:
    """The example compiled, each ``expression  # value`` a check that the expression
    equals the value (the comment's last ``: `` part, when it is a Python literal)."""
    tree = ast.parse(code)
    lines = code.splitlines()
    for index, statement in enumerate(tree.body):
        if not isinstance(statement, ast.Expr) or statement.end_lineno != statement.lineno:
            continue
        comment = lines[statement.lineno - 1][statement.end_col_offset :].strip()
        if not comment.startswith("#"):
            continue
        try:
            expected = ast.literal_eval(comment[1:].rsplit(": ", 1)[-1].strip())
        except (ValueError, SyntaxError):
            continue
        check = ast.parse(f"assert _ == {expected!r}, _").body[0]
        assert isinstance(check, ast.Assert)
        value = ast.NamedExpr(ast.Name("_", ast.Store()), statement.value)
        compare = check.test
        assert isinstance(compare, ast.Compare)
        compare.left = value
        tree.body[index] = ast.fix_missing_locations(ast.copy_location(check, statement))
    return compile(tree, name, "exec")


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    """As ``make run`` serves: one token that may approve what it asked for, publishing
    asks first."""
    return start_service(
        "fake",
        SIESTA_TOOLS__ALLOW_SELF_APPROVAL="true",
        SIESTA_TOOLS__FUNCTION_POLICIES="{}",
        SIESTA_TOKENS=TOKENS,
    )


@pytest.fixture(scope="module")
def sandbox_service(start_service: StartService, docker_client: object) -> ServiceProcess:
    """The same on Docker, its image builds allowed Debian's mirror (as the image
    catalog's example says)."""
    return start_service(
        "docker",
        SIESTA_TOOLS__ALLOW_SELF_APPROVAL="true",
        SIESTA_TOKENS=TOKENS,
        SIESTA_EGRESS__ALLOW="deb.debian.org",
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("examples")
    (folder / ".siesta").mkdir()
    (folder / ".siesta" / "api-token").write_text(TOKEN + "\n")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    uuidgen = bin_dir / "uuidgen"  # util-linux's, where the machine lacks it
    uuidgen.write_text(f"#!{sys.executable}\nimport uuid\nprint(uuid.uuid4())\n")
    uuidgen.chmod(0o755)
    (folder / ".venv").symlink_to(REPO / ".venv")  # the several-instances guide's
    return folder


@pytest.fixture(scope="module")
def namespaces(service: ServiceProcess) -> Iterator[dict[Path, dict[str, Any]]]:
    pages: dict[Path, dict[str, Any]] = {}
    yield pages
    for namespace in pages.values():
        client = namespace.get("siesta")
        if isinstance(client, SiestaClient):
            client.close()


@pytest.mark.parametrize("example", RUNNABLE, ids=[example.id for example in RUNNABLE])
def test_example_runs(
    example: Example,
    request: pytest.FixtureRequest,
    service: ServiceProcess,
    workdir: Path,
    namespaces: dict[Path, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(workdir)
    if example.needs_sandbox:
        service = request.getfixturevalue("sandbox_service")
    code = example.code.replace(DEFAULT_URL, service.base_url)
    code = code.replace("localhost:8080", service.base_url.removeprefix("http://"))
    if example.python and example.needs_sandbox:
        environ = dict(os.environ)
        # As a reader who exported the E2B guide's variables (its first example).
        os.environ |= {
            "E2B_API_URL": f"{service.base_url}/e2b",
            "E2B_SANDBOX_URL": f"{service.base_url}/e2b/envd",
            "E2B_API_KEY": TOKEN,
            "E2B_VALIDATE_API_KEY": "false",
        }
        try:
            exec(checked(code, example.id), {})
        finally:
            os.environ.clear()
            os.environ.update(environ)
        return
    if example.python:
        namespace = namespaces.setdefault(
            example.page,
            {
                "siesta": SiestaClient(service.base_url, TOKEN),
                "token": TOKEN,
                "agent": dict(AGENT),
                "user": dict(USER),
            },
        )
        exec(checked(code, example.id), namespace)
        return
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        env=shell_environment(workdir),
        capture_output=True,
        text=True,
        timeout=300 if example.needs_sandbox else 60,  # an image build: apt-get
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # curl succeeds on any answer: a route or a token the manual gets wrong does not,
    # nor a function that fails.
    wrong = re.findall(
        r'"code":\s*"(unauthorized|forbidden|\w+_not_allowed|not_found|invalid_\w+)"'
        r'|"ok":\s*false|"state":\s*"failed"',
        result.stdout,
    )
    assert not wrong, result.stdout


def shell_environment(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TOKEN": TOKEN,
        "APPROVER": APPROVER,
        "ADMIN_TOKEN": ADMIN_TOKEN,
        "PATH": f"{workdir / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}",
    }


@pytest.mark.parametrize("example", SERVING, ids=[example.id for example in SERVING])
def test_serving_example_serves(example: Example, workdir: Path) -> None:
    """Started as written (its ports free ones), every service it starts answers
    ``/healthz``; then it is stopped, all it started with it."""
    ports = {port: free_port() for port in SERVED_PORTS}
    code = re.sub(
        r"\b(8080|8081|6379)\b", lambda match: str(ports[int(match.group())]), example.code
    )
    services = [ports[port] for port in (8080, 8081) if str(port) in example.code]
    runs_make = code.lstrip().startswith("make ")
    environment = {
        **shell_environment(workdir),
        # `make run` serves from the repository, on PORT, its data where the test says.
        "PORT": str(ports[8080]),
        "SIESTA_DATA_DIR": str(workdir / ".siesta-make-run"),
        "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps({TEST_RUN_LABEL: TEST_RUN_ID}),
        "SIESTA_POOL__ENABLED": "false",
        "SIESTA_HTTP__DRAIN_SECONDS": "5",
        "FRESH_IMAGES": "0",  # never rebuild the images under the rest of the suite
    }
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # `make test`'s own, not the reader's
        environment.pop(name, None)
    if not runs_make:
        del environment["SIESTA_DATA_DIR"]  # the example sets its own
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", code + "wait\n"],
        cwd=REPO if runs_make else workdir,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        for port in services:
            answered = wait_until(partial(healthy, port, process), SERVES_SECONDS)
            assert answered, f"nothing answers on {port}: {stopped_output(process)}"
    finally:
        stop_group(process)
        assert process.stdout is not None
        process.stdout.close()


def healthy(port: int, process: subprocess.Popen[bytes]) -> bool:
    assert process.poll() is None, f"the example ended: {stopped_output(process)}"
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def stop_group(process: subprocess.Popen[bytes]) -> None:
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sent)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            continue


def stopped_output(process: subprocess.Popen[bytes]) -> str:
    if process.poll() is None:
        return "(still running)"
    assert process.stdout is not None
    return process.stdout.read().decode(errors="replace")[-3000:]
