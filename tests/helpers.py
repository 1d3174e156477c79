"""Helpers for tests: the labelled test run, a real service process, HTTP calls."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import yaml

from siesta_contract.agents import AgentConfig, UserInfo

from runtime.providers.docker.disks import DEFAULT_DISK_ROOT, LoopDisks
from runtime.providers.docker.layers import LAYER_SUFFIX, WritableLayers
from runtime.providers.docker.network import HostFirewall
from runtime.seams.providers import DEPLOYMENT_LABEL, SNAPSHOT_LABEL
from runtime.tools.call import ToolCall, agent_context
from runtime.tools.catalog import CatalogFunction

TEST_RUN_ID = uuid.uuid4().hex[:12]
TEST_RUN_LABEL = "siesta.test-run"
TEST_DEPLOYMENT = f"test-{TEST_RUN_ID}"
"""The deployment id of providers that tests build directly (services make their own)."""
TOKEN = "test-token-" + uuid.uuid4().hex
TEST_DISK_ROOT = DEFAULT_DISK_ROOT / TEST_DEPLOYMENT
"""Every test service's sandbox disks (``SIESTA_SANDBOX__DISK_DIR``: a folder per
deployment inside), removed at the end."""
TEST_DISKS = LoopDisks(TEST_DISK_ROOT / TEST_DEPLOYMENT)
"""The disks of providers the tests make themselves (deployment ``TEST_DEPLOYMENT``)."""


def gvisor_catalog(folder: Path) -> Path:
    """The shipped catalog with every image under gVisor (``runtime: runsc``)."""
    catalog = yaml.safe_load((REPO / "images" / "catalog.yaml").read_text())
    for image in catalog["images"]:
        image["runtime"] = "runsc"
        image.pop("build", None)
    path = folder / "catalog.yaml"
    path.write_text(yaml.safe_dump(catalog))
    return path


def disk_image(name: str) -> Path:
    """A sandbox disk image of this run, whichever deployment made it."""
    found = list(TEST_DISK_ROOT.glob(f"*/{name}.img"))
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


REPO = Path(__file__).resolve().parent.parent
APPROVER_TOKEN = "approver-token-" + uuid.uuid4().hex
"""A token with only the ``approve`` scope (see ``tokens_setting``)."""


def tokens_setting(
    *tokens: tuple[str, str, list[str]] | tuple[str, str, list[str], str | dict[str, Any]],
) -> str:
    """``SIESTA_TOKENS`` for (name, token, scopes[, org or more fields]) entries: digests,
    never the tokens."""
    return json.dumps(
        [
            {
                "name": name,
                "sha256": hashlib.sha256(token.encode()).hexdigest(),
                "scopes": scopes,
                **({"org": more[0]} if more and isinstance(more[0], str) else {}),
                **(more[0] if more and isinstance(more[0], dict) else {}),
            }
            for name, token, scopes, *more in tokens
        ]
    )


@dataclass
class ServiceProcess:
    """A ``siesta-runtime serve`` child process and an HTTP client for it."""

    process: subprocess.Popen[bytes]
    base_url: str
    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    """The SIESTA_* settings it was started with (beyond the shared test ones)."""
    environment: dict[str, str] = field(default_factory=dict)
    """Its whole environment (to start it again: ``respawn``)."""

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.base_url, timeout=120)

    def wait_contract_built(self) -> None:
        """Until the instance's OpenAPI document is built (in the background from its
        start; its idempotency middleware reads it on the first keyed request, which
        waits for it): for tests that time keyed requests against each other."""
        assert self.client.get("/openapi.json").status_code == 200

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                msg = f"service exited with {self.process.returncode}:\n{self.log()}"
                raise RuntimeError(msg)
            try:
                if self.client.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        msg = f"service did not become ready in {timeout} s:\n{self.log()}"
        raise RuntimeError(msg)

    def log(self, tail: int | None = 5000) -> str:
        path = self.data_dir / "service.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return text[-tail:] if tail else text

    def peak_rss_kb(self) -> int:
        """The process's high-water mark of resident memory (VmHWM)."""
        return self._status_kb("VmHWM")

    def rss_kb(self) -> int:
        """The process's resident memory now (VmRSS)."""
        return self._status_kb("VmRSS")

    def _status_kb(self, field_name: str) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1])
        msg = f"{field_name} not found"
        raise RuntimeError(msg)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to release anything."""
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


StartService = Callable[..., ServiceProcess]


def spawn_service(
    data_dir: Path,
    environment: dict[str, str],
    overrides: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    log_mode: str = "wb",
) -> ServiceProcess:
    """``siesta-runtime serve`` on a free port with this environment; ready when returned."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "service.log").open(log_mode) as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(port), *args],
            cwd=REPO,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    service = ServiceProcess(
        process, f"http://127.0.0.1:{port}", data_dir, dict(overrides or {}), environment
    )
    service.wait_ready()
    return service


def respawn(service: ServiceProcess) -> ServiceProcess:
    """The same service started again on its data (after ``kill`` or ``stop``); its log
    goes on after the first one's."""
    return spawn_service(service.data_dir, service.environment, service.env, log_mode="ab")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def headers(
    org: str = "org-a", user: str = "user-1", image: str | None = "debian-base"
) -> dict[str, str]:
    result = {"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": org, "X-Siesta-User": user}
    if image is not None:
        result["X-Siesta-Base-Image"] = image
    return result


def new_conversation() -> str:
    return f"conv-{uuid.uuid4().hex[:10]}"


def sandbox_of(service: ServiceProcess, conversation: str) -> str:
    """The Docker container of the conversation's current session."""
    response = service.client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers())
    return f"siesta-{response.json()['sessionId']}"


@contextlib.contextmanager
def event_stream(
    service: ServiceProcess, path: str, body: dict[str, Any], timeout: float = 60
) -> Iterator[httpx.Response]:
    """A POST that asks for server-sent events (read them with ``iter_lines``)."""
    with httpx.stream(
        "POST",
        f"{service.base_url}{path}",
        json=body,
        headers={**headers(), "Accept": "text/event-stream"},
        timeout=timeout,
    ) as response:
        yield response


def run_command(
    client: httpx.Client,
    conversation: str,
    command: str,
    *,
    org: str = "org-a",
    image: str | None = "debian-base",
    **body: Any,
) -> dict[str, Any]:
    """runCommand that must succeed at the HTTP level; returns the result body."""
    response = client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": command, **body},
        headers=headers(org=org, image=image),
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def call(
    client: httpx.Client,
    conversation: str,
    function: str,
    body: dict[str, Any],
    *,
    org: str = "org-a",
    image: str | None = "debian-base",
    status: int = 200,
) -> dict[str, Any]:
    """A sandbox function that must answer with ``status``; returns the JSON body."""
    response = client.post(
        f"/v1/conversations/{conversation}/sandbox/{function}",
        json=body,
        headers=headers(org=org, image=image),
    )
    assert response.status_code == status, response.text
    result: dict[str, Any] = response.json()
    return result


def upload(
    client: httpx.Client,
    conversation: str,
    name: str,
    data: bytes,
    *,
    org: str = "org-a",
    content_type: str = "application/octet-stream",
    status: int = 201,
) -> dict[str, Any]:
    response = client.post(
        f"/v1/conversations/{conversation}/files",
        files={"file": (name, data, content_type)},
        headers=headers(org=org),
    )
    assert response.status_code == status, response.text
    result: dict[str, Any] = response.json()
    return result


def container_states(client: docker.DockerClient, labels: list[str]) -> dict[str, str]:
    """Containers carrying every label in ``labels``: name → state ("paused", "running"...).

    One listing call and nothing more: ``containers.list`` inspects each container after
    listing, and fails when the service removes one in between (a pool shrinking does)."""
    listed = client.api.containers(all=True, filters={"label": labels})
    return {str(c["Names"][0]).lstrip("/"): str(c["State"]) for c in listed}


def run_resources(client: docker.DockerClient, **labels: str) -> tuple[list[str], list[str]]:
    """Names of this test run's containers and volumes, optionally narrowed by labels."""
    filters = [f"{TEST_RUN_LABEL}={TEST_RUN_ID}", *(f"{k}={v}" for k, v in labels.items())]
    containers = list(container_states(client, filters))
    volumes = [str(v.name) for v in client.volumes.list(filters={"label": filters})]
    return containers, volumes


def remove_run_resources(client: docker.DockerClient) -> None:
    """Remove everything this test run labelled; one failure must not stop the rest."""
    remove_labelled(client, f"{TEST_RUN_LABEL}={TEST_RUN_ID}", TEST_DISK_ROOT)


# Clean-up removes hundreds of containers at the end of a run; the engine's work
# for each (kill, unmount, delete the layer) is mostly waiting, so a few at once.
CLEAN_UP_THREADS = 6


def _each(items: Iterable[Any], action: Callable[[Any], None]) -> None:
    with ThreadPoolExecutor(CLEAN_UP_THREADS) as pool:
        list(pool.map(action, items))


def remove_labelled(client: docker.DockerClient, label: str, disk_root: Path) -> None:
    """Containers, volumes and networks with ``label``, the egress firewall chains of
    their deployments, and every sandbox disk under ``disk_root`` (folders too)."""
    folders = [LoopDisks(path) for path in disk_root.iterdir()] if disk_root.is_dir() else []
    layers = WritableLayers(LoopDisks(disk_root))  # releasing needs no image

    def remove_container(name: str) -> None:
        try:
            container = client.containers.get(name)
        except docker.errors.NotFound:
            return  # removed by a service still winding down
        with contextlib.suppress(docker.errors.APIError, KeyError):
            # The engine cannot delete a container whose layer folder has our mount.
            layer = Path(container.attrs["GraphDriver"]["Data"]["UpperDir"]).parent
            layers.release(container.name or "", layer)
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True, v=True)

    def remove_volume(volume: Any) -> None:
        with contextlib.suppress(docker.errors.APIError):
            volume.remove(force=True)

    _each(container_states(client, [label]), remove_container)
    _each(client.volumes.list(filters={"label": label}), remove_volume)
    for image in client.images.list(filters={"label": [label, SNAPSHOT_LABEL]}):
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(str(image.id), force=True)  # snapshots (committed sandboxes)
    for network in client.networks.list(filters={"label": label}):
        deployment = (network.attrs.get("Labels") or {}).get(DEPLOYMENT_LABEL)
        with contextlib.suppress(docker.errors.APIError):
            network.remove()
        if deployment:
            HostFirewall(deployment).remove()
    for disks in folders:

        def remove_disk(name: str, disks: LoopDisks = disks) -> None:
            if name.endswith(LAYER_SUFFIX):
                WritableLayers(disks).remove(name.removesuffix(LAYER_SUFFIX), None)
            else:
                disks.remove(name)

        _each(disks.images(every=True), remove_disk)
        disks.remove_spares()  # what a killed service left made ahead
        shutil.rmtree(disks.directory / "snapshots", ignore_errors=True)
        with contextlib.suppress(OSError):
            disks.directory.rmdir()
    with contextlib.suppress(OSError):
        disk_root.rmdir()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``siesta-runtime ARGS...`` as a real process; its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def service_cli_env(service: ServiceProcess, **env: str) -> dict[str, str]:
    """The environment a one-shot command needs to act for this service's deployment."""
    environment = {
        **os.environ,
        "SIESTA_DATA_DIR": str(service.data_dir),
        "SIESTA_SANDBOX__DISK_DIR": str(TEST_DISK_ROOT),
        **service.env,
        **env,
    }
    environment.pop("SIESTA_API_TOKEN", None)  # the CronJob needs no API token
    return environment


def run_reconcile(service: ServiceProcess, *args: str, **env: str) -> dict[str, Any]:
    """The real ``siesta-runtime reconcile`` against a service's state and Docker labels."""
    result = run_cli("reconcile", *args, env=service_cli_env(service, **env), timeout=600)
    assert result.returncode == 0, result.stderr
    summary: dict[str, Any] = json.loads(result.stdout)
    return summary


def deployment_of(service: ServiceProcess) -> str:
    """The deployment id the service labels its sandboxes with (kept in its store)."""
    result = run_cli("sandboxes", "list", env=service_cli_env(service))
    assert result.returncode == 0, result.stderr
    deployment: str = json.loads(result.stdout)["deployment"]
    return deployment


def tool_call(
    function: str = "f",
    *,
    source: str = "system:test",
    group: str = "System",
    agent: dict[str, Any] | None = None,
    user: str = "user",
    role: str = "Owner",
    org: str = "org",
    conversation: str = "conv",
    parameters: dict[str, Any] | None = None,
) -> ToolCall:
    """A call as the executor hands it to an adapter (agent fields in wire form)."""
    config = AgentConfig.model_validate({"id": "agent-1", **(agent or {})})
    person = UserInfo.model_validate({"id": user, "role": role})
    ctx = agent_context(org, conversation, config, person)
    entry = CatalogFunction(function, "", parameters or {}, group, source)
    return ToolCall(ctx, config, person, entry)


PUBLISH_WITHOUT_APPROVAL = {"SIESTA_TOOLS__FUNCTION_POLICIES": '{"publishFiles": "enabled"}'}
"""The deployment policy the test services run with unless a test says otherwise:
the tests of publishing itself would otherwise each need a second caller to approve.
The default (publishing asks first) is tested in tests/api/test_one_path.py."""
