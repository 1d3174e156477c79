"""Both providers hand the deployment's egress authority to the sandbox's agent (which
adds it to the trust store at start: images/siesta-agent/trust.c), and nothing when
there is none. The agent's side is tested on Docker in
tests/security/test_egress_secrets_docker.py (a sandbox verifies the proxy's
certificate with no `-k`)."""

from __future__ import annotations

import docker

from runtime.providers.docker.containers import TRUST_ENV, container_config
from runtime.providers.kubernetes.objects import SandboxObjects
from runtime.seams.provider_settings import KubernetesProviderSettings, SandboxSettings

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def docker_env(trust_pem: str | None) -> object:
    api = docker.APIClient(version="1.41")  # builds the request only: no engine is asked
    config = container_config(
        api, SandboxSettings(), "none", "img", "name", {}, None, trust_pem=trust_pem
    )
    return config.get("Env")


def test_a_docker_sandbox_gets_the_authority_only_when_there_is_one() -> None:
    assert docker_env(PEM) == [f"{TRUST_ENV}={PEM}"]
    assert docker_env(None) is None


def test_a_kubernetes_pod_gets_the_authority_only_when_there_is_one() -> None:
    settings = (SandboxSettings(), KubernetesProviderSettings(), "deployment")
    with_pem = SandboxObjects(*settings, trust_pem=PEM).pod("siesta-x", "img", {}, {})
    container = with_pem.to_dict()["spec"]["containers"][0]
    assert container["env"] == [{"name": TRUST_ENV, "value": PEM, "value_from": None}]
    without = SandboxObjects(*settings).pod("siesta-x", "img", {}, {})
    assert without.to_dict()["spec"]["containers"][0]["env"] is None
