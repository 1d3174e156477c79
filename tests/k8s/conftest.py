"""What the Kubernetes provider's tests share: the API server double with its faults
reset, and providers on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runtime.providers.kubernetes.provider import KubernetesProvider
from runtime.seams.provider_settings import KubernetesProviderSettings, SandboxSettings
from runtime.seams.providers import ExecRequest
from tests.helpers import TEST_DEPLOYMENT, TEST_RUN_ID, TEST_RUN_LABEL
from tests.k8s.apiserver import KUBERNETES_NAMESPACE, ApiServerDouble

IMAGE = "siesta/debian-base:1"


def provider_for(api: ApiServerDouble, **settings: Any) -> KubernetesProvider:
    sandbox = {
        key: settings.pop(key)
        for key in ("memory_limit_mb", "cpu_limit", "provision_timeout_seconds")
        if key in settings
    }
    return KubernetesProvider(
        SandboxSettings(extra_labels={TEST_RUN_LABEL: TEST_RUN_ID}, **sandbox),
        KubernetesProviderSettings(api_url=api.url, namespace=KUBERNETES_NAMESPACE, **settings),
        deployment_id=TEST_DEPLOYMENT,
        resume_timeout_seconds=30,
    )


@pytest.fixture
def api(kubernetes_api: ApiServerDouble) -> Iterator[ApiServerDouble]:
    """The session's double, its faults off again and its refusals checked after."""
    rejected = len(kubernetes_api.rejected)
    yield kubernetes_api
    kubernetes_api.faults.unpullable_images.clear()
    kubernetes_api.faults.unschedulable = False
    kubernetes_api.faults.pod_quota_exceeded = False
    kubernetes_api.faults.exec_forbidden = False
    kubernetes_api.runtime_classes.clear()
    assert kubernetes_api.rejected[rejected:] == []


@pytest.fixture
def provider(api: ApiServerDouble) -> Iterator[KubernetesProvider]:
    kubernetes = provider_for(api)
    yield kubernetes
    kubernetes.close()


def run(provider: KubernetesProvider, sandbox: str, command: str) -> str:
    result = provider.inside.exec(sandbox, ExecRequest(command, 30, 4096, 1))
    assert result.exit_code == 0, result.stderr.text
    return result.stdout.text
