"""A catalog image may let setuid programs (sudo) raise privileges; others never."""

from __future__ import annotations

import docker

from runtime.providers.docker.containers import container_config
from runtime.providers.kubernetes.objects import SandboxObjects
from runtime.seams.provider_settings import KubernetesProviderSettings, SandboxSettings


def security_opt(allow_setuid: bool) -> object:
    api = docker.APIClient(version="1.41")  # builds the request only: no engine is asked
    config = container_config(api, SandboxSettings(), "none", "img", "name", {}, None, allow_setuid)
    return config["HostConfig"]["SecurityOpt"]


def test_docker_sandboxes_keep_no_new_privileges_unless_the_image_allows_setuid() -> None:
    assert security_opt(allow_setuid=False) == ["no-new-privileges"]
    assert security_opt(allow_setuid=True) == []


def test_kubernetes_pods_allow_escalation_only_when_the_image_allows_setuid() -> None:
    objects = SandboxObjects(SandboxSettings(), KubernetesProviderSettings(), "deployment")
    for allowed in (False, True):
        pod = objects.pod("siesta-x", "img", {}, {}, allowed).to_dict()
        context = pod["spec"]["containers"][0]["security_context"]
        assert context["allow_privilege_escalation"] is allowed
        assert context["capabilities"]["drop"] == ["ALL"]
