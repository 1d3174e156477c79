"""Fixtures: Docker with clean-up of everything this run labelled, real services.

Everything a test run creates on the Docker engine carries the label
``siesta.test-run=<run id>`` (through ``SIESTA_SANDBOX__EXTRA_LABELS``) and is
removed at the end of the run, even when tests fail.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import docker
import pytest

from tests.cpython_workarounds import serialise_ast_parse
from tests.egress_upstream import serving_ok
from tests.helpers import (
    PUBLISH_WITHOUT_APPROVAL,
    TEST_DISK_ROOT,
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    TOKEN,
    ServiceProcess,
    StartService,
    gvisor_catalog,
    remove_run_resources,
    spawn_service,
)
from tests.k8s.apiserver import KUBERNETES_NAMESPACE, ApiServerDouble
from tests.redis_server import RedisServer

serialise_ast_parse()


SLOWEST_FIRST = (
    "tests/api/test_openapi_contract.py",
    "tests/clients/test_long_command_docker.py",
    "tests/faults/test_fault_run_docker.py",
    "tests/runtime/test_imagebuild.py",
    "tests/test_service_image.py",
    "tests/api/test_soak_docker.py",
    "tests/api/test_lifecycle_docker.py",
    "tests/security/test_attacks_docker.py",
    "tests/api/test_run_command_docker.py",
    "tests/clients/test_standalone_install.py",
    "tests/faults/test_engine_restart.py",
    "tests/faults/test_process_readers_docker.py",
    "tests/api/test_openapi_document.py",
)
"""Modules of a minute or more, started first: with the suite in several processes
(``make test``), one of them started last would run on alone at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session")
def run_labels() -> dict[str, str]:
    return {TEST_RUN_LABEL: TEST_RUN_ID}


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    client.ping()  # no Docker engine is a failure, never a skip
    yield client
    remove_run_resources(client)
    client.close()


@pytest.fixture(scope="session")
def kubernetes_api(docker_client: docker.DockerClient) -> Iterator[ApiServerDouble]:
    """The Kubernetes API server double (tests/k8s/apiserver.py), its pods run on Docker."""
    double = ApiServerDouble(docker_client, {TEST_RUN_LABEL: TEST_RUN_ID})
    double.start()
    yield double
    double.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    """An HTTP server on this host's loopback answering ``200 ok``: where egress tests
    send a sandbox (the egress proxy runs on the host; see ``egress_to``)."""
    with serving_ok() as port:
        yield port


@pytest.fixture(scope="module")
def start_service(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[StartService]:
    """Starts real ``siesta-runtime serve`` processes; stops them after the module."""
    started: list[ServiceProcess] = []

    def start(provider: str = "docker", **env: str) -> ServiceProcess:
        if provider == "docker":  # its sandboxes go with the session's (run label)
            request.getfixturevalue("docker_client")
        data_dir = tmp_path_factory.mktemp("siesta-data")
        environment = {
            **os.environ,
            "SIESTA_API_TOKEN": TOKEN,
            "SIESTA_DATA_DIR": str(data_dir),
            "SIESTA_PROVIDER__TYPE": provider,
            "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps({TEST_RUN_LABEL: TEST_RUN_ID}),
            "SIESTA_SANDBOX__DISK_DIR": str(TEST_DISK_ROOT),
            # The warm pool makes containers in the background; only the tests of
            # the pool (tests/api/test_pool_docker.py) turn it on.
            "SIESTA_POOL__ENABLED": "false",
            # A stream a test left open would hold SIGTERM's drain (stop) past its wait.
            "SIESTA_HTTP__DRAIN_SECONDS": "5",
            **PUBLISH_WITHOUT_APPROVAL,
            **env,
        }
        # What a one-shot command (reconcile) for this service needs besides the data dir.
        overrides = {"SIESTA_PROVIDER__TYPE": provider, **env}
        service = spawn_service(data_dir, environment, overrides)
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


@pytest.fixture(scope="module")
def docker_service(
    start_service: StartService, docker_client: docker.DockerClient
) -> ServiceProcess:
    return start_service("docker")


@pytest.fixture(scope="module")
def kubernetes_service(
    start_service: StartService, kubernetes_api: ApiServerDouble
) -> ServiceProcess:
    """The service with the Kubernetes provider, on the API server double."""
    return start_service(
        "kubernetes",
        SIESTA_PROVIDER__API_URL=kubernetes_api.url,
        SIESTA_PROVIDER__NAMESPACE=KUBERNETES_NAMESPACE,
    )


@pytest.fixture(scope="module")
def gvisor_service(
    start_service: StartService,
    docker_client: docker.DockerClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> ServiceProcess:
    """The service on Docker with every catalog image under gVisor (``runtime: runsc``),
    as an operator's catalog says it; setup registers runsc with the engine."""
    path = gvisor_catalog(tmp_path_factory.mktemp("gvisor"))
    return start_service("docker", SIESTA_IMAGES__CATALOG_PATH=str(path))


@pytest.fixture(scope="module", params=["docker", "gvisor", "kubernetes"])
def sandbox_service(request: pytest.FixtureRequest) -> ServiceProcess:
    """The service on each real provider (and runtime): the provider-independent API
    tests run on all of them."""
    service: ServiceProcess = request.getfixturevalue(f"{request.param}_service")
    return service
