"""What only the Kubernetes provider does: the objects it sends (checked against the
schemas by the API server double, and here for what they say), the verbs it uses
(exactly the Role's), how cluster refusals reach the caller, suspension as a pod
deleted and made again, and the service's lifecycle on it.

The provider-independent contract runs on it too: tests/runtime/providers and the
file and command API tests run on each real provider.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from runtime.core.errors import (
    CapacityUnavailable,
    ImageUnavailable,
    ProviderUnavailable,
    SandboxUnavailable,
)
from runtime.providers.kubernetes.provider import RBAC_RULES, KubernetesProvider
from runtime.seams.provider_settings import KubernetesProviderSettings, SandboxSettings
from runtime.seams.providers import SandboxSpec, SandboxState
from tests.helpers import (
    TEST_DEPLOYMENT,
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    StartService,
    free_port,
    headers,
    new_conversation,
    run_command,
    run_reconcile,
)
from tests.k8s.apiserver import KUBERNETES_NAMESPACE, ApiServerDouble, Recorded
from tests.k8s.conftest import IMAGE, provider_for, run

pytestmark = pytest.mark.docker


def objects(api: ApiServerDouble, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    with api.lock:
        return (
            json.loads(json.dumps(api.pods[(KUBERNETES_NAMESPACE, name)])),
            json.loads(json.dumps(api.claims[(KUBERNETES_NAMESPACE, name)])),
        )


def verbs_used(requests: list[Recorded]) -> dict[str, set[str]]:
    """What RBAC would check for each request (resource, verb)."""
    used: dict[str, set[str]] = {}
    for request in requests:
        parts = request.path.strip("/").split("/")
        if parts[:2] != ["api", "v1"] or len(parts) < 5:
            continue  # /version: allowed to everyone, no rule needed
        resource = parts[4] if len(parts) < 7 else f"{parts[4]}/{parts[6]}"
        collection = len(parts) == 5
        if resource.endswith(("/attach", "/exec")):
            # A websocket attach or exec is a GET, authorised as "create" by servers
            # since 1.30 (KEP-4006) and as "get" before: the Role grants both.
            verbs = {"create", "get"}
        elif request.method == "GET":
            watch = request.query.get("watch") in ("true", "1")
            verbs = {"watch" if watch else "list" if collection else "get"}
        else:
            verbs = {{"POST": "create", "DELETE": "delete", "PATCH": "patch"}[request.method]}
        used.setdefault(resource, set()).update(verbs)
    return used


def test_pod_and_claim_carry_the_labels_limits_and_hardening(api: ApiServerDouble) -> None:
    provider = provider_for(
        api,
        memory_limit_mb=256,
        cpu_limit=0.5,
        runtime_class="gvisor",
        storage_class="fast-ssd",
        workspace_size="2Gi",
        node_selector={"pool": "sandboxes"},
    )
    session_id = uuid.uuid4().hex
    labels = {
        "siesta.org": "org:with:colons",  # not a valid label value: kept as an annotation
        "siesta.conversation": "c1",
        "siesta.session": session_id,
        "siesta.image-id": "debian-base",
    }
    try:
        name = provider.lifecycle.create(SandboxSpec(session_id, IMAGE, labels))
        pod, claim = objects(api, name)
        info = provider.lifecycle.inspect(name)
        listed = {s.sandbox_id: s for s in provider.lifecycle.list_sandboxes()}
    finally:
        provider.lifecycle.destroy(name)
        provider.close()

    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["image"] == IMAGE
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {
            "drop": ["ALL"],
            "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL"],
        },
    }
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert container["resources"]["limits"] == {"memory": "256Mi", "cpu": "500m"}
    assert (container["stdin"], container["stdinOnce"], container["tty"]) == (True, False, False)
    assert spec["automountServiceAccountToken"] is False
    assert spec["runtimeClassName"] == "gvisor"
    assert spec["nodeSelector"] == {"pool": "sandboxes"}
    assert spec["volumes"] == [{"name": "workspace", "persistentVolumeClaim": {"claimName": name}}]
    assert container["volumeMounts"] == [{"name": "workspace", "mountPath": "/mnt/work"}]
    assert claim["spec"]["storageClassName"] == "fast-ssd"
    assert claim["spec"]["resources"] == {"requests": {"storage": "2Gi"}}
    for obj in (pod, claim):
        meta = obj["metadata"]
        assert meta["labels"]["siesta.deployment"] == TEST_DEPLOYMENT
        assert meta["labels"]["siesta.session"] == session_id
        assert meta["labels"][TEST_RUN_LABEL] == TEST_RUN_ID
        assert "siesta.org" not in meta["labels"]
        assert meta["annotations"]["siesta.org"] == "org:with:colons"
    # The sandbox network policy selects these.
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "sandbox"
    # Read back, labels and annotations are one set, as on Docker.
    expected = {**labels, "siesta.deployment": TEST_DEPLOYMENT, TEST_RUN_LABEL: TEST_RUN_ID}
    assert info.labels == expected and listed[name].labels == expected
    assert info.state is SandboxState.RUNNING


def test_the_provider_uses_exactly_the_verbs_the_role_grants(api: ApiServerDouble) -> None:
    provider = provider_for(api)
    first = len(api.requests)
    name = provider.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    try:
        run(provider, name, "echo x > f")
        provider.lifecycle.pause(name)
        provider.lifecycle.unpause(name)
        provider.lifecycle.stop(name)
        provider.lifecycle.inspect(name)
        provider.lifecycle.list_sandboxes()
        provider.lifecycle.list_workspaces()
        api.faults.exec_forbidden = True  # the attach, as where exec cannot serve
        provider.lifecycle.start(name)
        assert run(provider, name, "cat f") == "x\n"
        provider.ping()
    finally:
        provider.lifecycle.destroy(name)
        provider.close()
    assert verbs_used(api.requests[first:]) == {k: set(v) for k, v in RBAC_RULES.items()}


def test_suspension_deletes_the_pod_and_keeps_the_claim(
    api: ApiServerDouble, provider: KubernetesProvider
) -> None:
    name = provider.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    try:
        run(provider, name, "echo kept > notes.txt; nohup sleep 1002 >/dev/null 2>&1 &")
        provider.lifecycle.pause(name)
        paused = provider.lifecycle.inspect(name).state
        with api.lock:
            pod = api.pods.get((KUBERNETES_NAMESPACE, name))
            pod_going = pod is None or "deletionTimestamp" in pod["metadata"]
            tier = dict(api.claims[(KUBERNETES_NAMESPACE, name)]["metadata"]["annotations"])
        provider.lifecycle.unpause(name)
        after = run(provider, name, "cat notes.txt; ps -eo args | grep -c '^sleep 1002' || true")
        with api.lock:
            annotations = api.claims[(KUBERNETES_NAMESPACE, name)]["metadata"]["annotations"]
    finally:
        provider.lifecycle.destroy(name)
    assert paused is SandboxState.PAUSED
    assert pod_going
    assert tier["siesta.io/suspended"] == "paused"
    assert after == "kept\n0\n"  # the workspace is back; the processes are not
    assert "siesta.io/suspended" not in annotations


def test_a_sandbox_whose_pod_vanished_is_stopped_and_its_channel_ends(
    api: ApiServerDouble, provider: KubernetesProvider
) -> None:
    name = provider.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    try:
        run(provider, name, "true")
        api.vanish_pod(KUBERNETES_NAMESPACE, name)  # its node was lost
        with pytest.raises(SandboxUnavailable, match="try again"):
            run(provider, name, "true")
        state = provider.lifecycle.inspect(name).state
    finally:
        provider.lifecycle.destroy(name)
    assert state is SandboxState.STOPPED
    assert provider.lifecycle.inspect(name).state is SandboxState.MISSING


def test_an_image_the_cluster_cannot_pull_is_image_unavailable(
    api: ApiServerDouble, provider: KubernetesProvider
) -> None:
    api.faults.unpullable_images.add(IMAGE)
    with pytest.raises(ImageUnavailable, match="cannot pull base image siesta/debian-base:1"):
        provider.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    assert no_leftovers(api, provider)


def test_a_cluster_without_room_is_capacity_unavailable(
    api: ApiServerDouble, provider: KubernetesProvider
) -> None:
    api.faults.unschedulable = True
    with pytest.raises(CapacityUnavailable, match="Insufficient memory"):
        provider.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    api.faults.unschedulable = False
    api.faults.pod_quota_exceeded = True
    with pytest.raises(CapacityUnavailable, match="exceeded quota"):
        provider.lifecycle.create(SandboxSpec(uuid.uuid4().hex, IMAGE, {}))
    assert no_leftovers(api, provider)


def no_leftovers(api: ApiServerDouble, provider: KubernetesProvider) -> bool:
    """Nothing of a failed creation stays: its pod and claim are deleted."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not provider.lifecycle.list_sandboxes() and not provider.lifecycle.list_workspaces():
            return True
        time.sleep(0.1)
    return False


def test_an_unreachable_api_server_is_provider_unavailable() -> None:
    settings = KubernetesProviderSettings(
        api_url=f"http://127.0.0.1:{free_port()}", request_timeout_seconds=2
    )
    provider = KubernetesProvider(
        SandboxSettings(), settings, deployment_id="d", resume_timeout_seconds=5
    )
    try:
        with pytest.raises(ProviderUnavailable, match="not reachable"):
            provider.ping()
    finally:
        provider.close()


def test_service_suspends_and_resumes_conversations_on_kubernetes(
    start_service: StartService, kubernetes_api: ApiServerDouble
) -> None:
    """The lifecycle through the HTTP API and the reconcile CLI, as on Docker, with
    the difference Kubernetes makes: a paused sandbox keeps its files, not its processes."""
    tiers = {
        "SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS": "1",
        "SIESTA_LIFECYCLE__STOP_AFTER_SECONDS": "100000",
        "SIESTA_LIFECYCLE__RETIRE_AFTER_SECONDS": "200000",
        "SIESTA_RECONCILE__ORPHAN_GRACE_SECONDS": "100000",
    }
    labels = {TEST_RUN_LABEL: TEST_RUN_ID, "siesta.test-service": uuid.uuid4().hex[:8]}
    service = start_service(
        "kubernetes",
        SIESTA_PROVIDER__API_URL=kubernetes_api.url,
        SIESTA_PROVIDER__NAMESPACE=KUBERNETES_NAMESPACE,
        SIESTA_SANDBOX__EXTRA_LABELS=json.dumps(labels),
        SIESTA_RECONCILE__BACKGROUND="false",
        **tiers,
    )
    conversation = new_conversation()
    # The background process lets go of the command's output: a command's answer
    # waits for its output to end, as a shell over ssh does.
    started = run_command(
        service.client, conversation, "echo kept > notes.txt; nohup sleep 1003 >/dev/null 2>&1 &"
    )
    time.sleep(1.2)
    summary = run_reconcile(service, **tiers)
    state = service.client.get(
        f"/v1/conversations/{conversation}/sandbox", headers=headers()
    ).json()
    resumed = run_command(
        service.client, conversation, "cat notes.txt; ps -eo args | grep -c '^sleep 1003' || true"
    )
    deleted = service.client.delete(f"/v1/conversations/{conversation}", headers=headers())

    assert (started["exitCode"], started["timedOut"]) == (0, False)
    assert summary["actions"]["idle_sessions_paused"]["ids"] == [state["sessionId"]]
    assert (state["status"], state["state"]) == ("paused", "paused")
    assert resumed["resumed"] == "paused" and resumed["workspaceReset"] is False
    assert resumed["stdout"] == "kept\n0\n"
    assert deleted.status_code in (200, 204)
    session_pods = [
        name
        for (namespace, name), pod in list(kubernetes_api.pods.items())
        if pod["metadata"]["labels"].get("siesta.test-service") == labels["siesta.test-service"]
        and "deletionTimestamp" not in pod["metadata"]
    ]
    assert session_pods == []
