"""The Kubernetes manifests: every overlay renders (kubectl kustomize, offline),
every object validates against the Kubernetes OpenAPI schemas (strict: unknown
fields are errors), and the invariants the deployment relies on hold."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from cli.server import SHUTDOWN_SECONDS
from runtime.images.catalog import ImageCatalog
from runtime.providers.kubernetes.objects import COMPONENT_LABELS
from runtime.providers.kubernetes.provider import RBAC_RULES
from runtime.seams.provider_settings import KubernetesProviderSettings
from runtime.seams.store_settings import RedisStoreSettings
from runtime.settings import DRAIN_MARGIN_SECONDS, Settings
from tests.helpers import REPO

K8S = REPO / "k8s"
OVERLAYS = sorted(path for path in (K8S / "overlays").iterdir() if path.is_dir())
SCHEMA_VERSION = "1.32.0"


def render(overlay: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not installed (scripts/setup.sh installs it)"
    result = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in by_kind(objects, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


@pytest.fixture(params=OVERLAYS, ids=[path.name for path in OVERLAYS])
def objects(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(request.param)


def test_every_object_validates_against_the_kubernetes_schemas(
    objects: list[dict[str, Any]],
) -> None:
    for obj in objects:
        kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)


def test_the_examples_validate_too() -> None:
    for path in sorted((K8S / "examples").glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)


def test_the_service_runs_as_several_hardened_replicas(objects: list[dict[str, Any]]) -> None:
    deployment = one(objects, "Deployment", "siesta-runtime")
    spec = deployment["spec"]
    assert spec["replicas"] >= 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["affinity"]["podAntiAffinity"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    assert "memory" in container["resources"]["limits"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    secret_env = [e for e in container["env"] if e["name"] == "SIESTA_API_TOKEN"]
    assert secret_env[0]["valueFrom"]["secretKeyRef"]["key"] == "token"
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    service = one(objects, "Service", "siesta-runtime")
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]


def test_any_replica_takes_any_request_and_one_at_a_time_is_disrupted(
    objects: list[dict[str, Any]],
) -> None:
    deployment = one(objects, "Deployment", "siesta-runtime")["spec"]
    assert deployment["replicas"] >= 2
    service = one(objects, "Service", "siesta-runtime")["spec"]
    assert service.get("type", "ClusterIP") == "ClusterIP"
    assert service.get("sessionAffinity", "None") == "None"  # no stickiness
    assert "sessionAffinityConfig" not in service
    pdb = one(objects, "PodDisruptionBudget", "siesta-runtime")["spec"]
    assert pdb["selector"]["matchLabels"] == deployment["selector"]["matchLabels"]
    assert pdb.get("minAvailable") == 1 or pdb.get("maxUnavailable") == 1
    assert pdb.get("minAvailable", 0) < deployment["replicas"]  # an eviction can happen
    rolling = deployment["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0  # a rollout keeps every replica serving


def test_a_stopping_replica_drains_within_its_grace_period(
    objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain time covers the longest command (set in the ConfigMap), and the
    kubelet waits for the preStop sleep, the drain and uvicorn's last seconds before
    it sends SIGKILL; readiness is /readyz, which answers 503 from the drain's start."""
    deployment = one(objects, "Deployment", "siesta-runtime")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    settings_map = one(objects, "ConfigMap", container["envFrom"][0]["configMapRef"]["name"])
    assert "SIESTA_COMMAND__MAX_TIMEOUT_SECONDS" in settings_map["data"]
    assert any(e["name"] == "SIESTA_HTTP__DRAIN_SECONDS" for e in container["env"])
    settings = _settings_of(objects, container, monkeypatch)
    command = settings.command
    longest = command.max_timeout_seconds + command.kill_grace_seconds + DRAIN_MARGIN_SECONDS
    assert settings.drain_seconds >= longest
    sleep, seconds = container["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep == "sleep"
    waits = float(seconds) + settings.drain_seconds + SHUTDOWN_SECONDS
    assert pod["terminationGracePeriodSeconds"] >= waits + 10  # the lifespan's end
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_the_autoscaler_is_an_example_that_scales_the_deployment_by_cpu(
    objects: list[dict[str, Any]],
) -> None:
    assert not by_kind(objects, "HorizontalPodAutoscaler")  # the base does not autoscale
    path = K8S / "examples" / "horizontalpodautoscaler.yaml"
    (autoscaler,) = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert autoscaler["apiVersion"] == "autoscaling/v2"
    spec = autoscaler["spec"]
    target = spec["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"]) == ("apps/v1", "Deployment")
    deployment = one(objects, "Deployment", target["name"])
    (metric,) = spec["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "cpu" in container["resources"]["requests"]  # what utilisation is of
    pdb = one(objects, "PodDisruptionBudget", "siesta-runtime")["spec"]
    assert spec["minReplicas"] >= 2 and spec["minReplicas"] > pdb.get("minAvailable", 0)
    assert spec["maxReplicas"] > spec["minReplicas"]


def test_no_pod_is_privileged(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        pod = _pod_spec(obj)
        if pod is None:
            continue
        assert not pod.get("hostNetwork") and not pod.get("hostPID")
        for container in pod["containers"]:
            context = container.get("securityContext", {})
            assert context.get("privileged") is not True, obj["metadata"]["name"]
            assert context.get("allowPrivilegeEscalation") is False, obj["metadata"]["name"]
        for volume in pod.get("volumes", []):
            assert "hostPath" not in volume, obj["metadata"]["name"]


def test_reconciliation_is_a_cronjob_that_never_overlaps(objects: list[dict[str, Any]]) -> None:
    cronjob = one(objects, "CronJob", "siesta-reconcile")
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    assert cronjob["spec"]["successfulJobsHistoryLimit"] >= 1
    assert cronjob["spec"]["failedJobsHistoryLimit"] >= 1
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["reconcile"]
    deployment = one(objects, "Deployment", "siesta-runtime")
    (service,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == service["image"]


def test_the_role_grants_exactly_what_the_provider_uses(objects: list[dict[str, Any]]) -> None:
    role = one(objects, "Role", "siesta-runtime")
    granted = {
        (resource, verb)
        for rule in role["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    used = {(resource, verb) for resource, verbs in RBAC_RULES.items() for verb in verbs}
    assert granted == used
    assert not by_kind(objects, "ClusterRole") and not by_kind(objects, "ClusterRoleBinding")
    binding = one(objects, "RoleBinding")
    assert binding["subjects"][0]["name"] == "siesta-runtime"


def test_sandbox_pods_receive_only_from_the_service_and_send_only_to_the_proxy(
    objects: list[dict[str, Any]],
) -> None:
    policy = one(objects, "NetworkPolicy", "siesta-sandboxes")
    spec = policy["spec"]
    selector = spec["podSelector"]["matchLabels"]
    # It selects exactly the pods the provider makes (they carry these labels) ...
    assert selector.items() <= COMPONENT_LABELS.items()
    assert selector["app.kubernetes.io/component"] == "sandbox"
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    # ... lets in only the service's own pods ...
    (rule,) = spec["ingress"]
    (source,) = rule["from"]
    service = one(objects, "Deployment", "siesta-runtime")["spec"]["template"]["metadata"]
    assert source["podSelector"]["matchLabels"].items() <= service["labels"].items()
    assert source["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "siesta-runtime"
    # ... and lets out only to the egress proxy's port (no DNS, nothing else).
    (out,) = spec["egress"]
    (target,) = out["to"]
    proxy_pods = one(objects, "Deployment", "siesta-egress")["spec"]["template"]["metadata"]
    assert target.keys() == {"podSelector"}
    assert target["podSelector"]["matchLabels"].items() <= proxy_pods["labels"].items()
    assert out["ports"] == [{"protocol": "TCP", "port": 3128}]


def test_the_egress_proxy_is_the_service_image_with_the_services_key(
    objects: list[dict[str, Any]],
) -> None:
    proxy = one(objects, "Deployment", "siesta-egress")["spec"]["template"]
    (container,) = proxy["spec"]["containers"]
    (service,) = one(objects, "Deployment", "siesta-runtime")["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["args"] == ["egress-proxy"]
    assert container["image"] == service["image"]
    assert container["envFrom"] == service["envFrom"]  # the same allowlist

    def key_source(c: dict[str, Any]) -> Any:
        return next(e for e in c["env"] if e["name"] == "SIESTA_EGRESS__KEY")["valueFrom"]

    assert key_source(container) == key_source(service)
    # The service points sandboxes at the proxy's Service, which selects the proxy pods.
    settings_map = one(objects, "ConfigMap", service["envFrom"][0]["configMapRef"]["name"])
    proxy_url = urlsplit(settings_map["data"]["SIESTA_EGRESS__PROXY_URL"])
    proxy_service = one(objects, "Service", proxy_url.hostname)
    assert proxy_service["spec"]["selector"].items() <= proxy["metadata"]["labels"].items()
    assert [p["port"] for p in proxy_service["spec"]["ports"]] == [proxy_url.port]
    # Only sandboxes may connect to it; it reaches no private range itself.
    policy = one(objects, "NetworkPolicy", "siesta-egress")["spec"]
    (ingress,) = policy["ingress"]
    (source,) = ingress["from"]
    assert source["podSelector"]["matchLabels"].items() <= COMPONENT_LABELS.items()
    assert source["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "sandbox"
    blocks = [t["ipBlock"] for rule in policy["egress"] for t in rule["to"] if "ipBlock" in t]
    refused = {net for block in blocks for net in block.get("except", [])}
    assert {"10.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"} <= refused


def test_the_egress_proxy_reaches_the_store_of_revoked_credentials(
    objects: list[dict[str, Any]],
) -> None:
    """The proxy reads revocations from the store the service writes them to (the same
    SIESTA_STORE__URL), and its network policy lets it reach that Redis, on that port
    and on no other of the cluster's pods."""
    proxy = one(objects, "Deployment", "siesta-egress")["spec"]["template"]
    (container,) = proxy["spec"]["containers"]
    settings_map = one(objects, "ConfigMap", container["envFrom"][0]["configMapRef"]["name"])
    assert not any(e["name"].startswith("SIESTA_STORE__") for e in container.get("env", []))
    store_url = urlsplit(settings_map["data"]["SIESTA_STORE__URL"])
    assert store_url.scheme == "redis"
    redis_service = one(objects, "Service", store_url.hostname)
    (redis_port,) = redis_service["spec"]["ports"]
    assert redis_port["port"] == store_url.port
    redis_pods = one(objects, "StatefulSet", store_url.hostname)["spec"]["template"]["metadata"]
    assert redis_service["spec"]["selector"].items() <= redis_pods["labels"].items()

    policy = one(objects, "NetworkPolicy", "siesta-egress")["spec"]
    to_pods = [
        (target["podSelector"]["matchLabels"], rule["ports"])
        for rule in policy["egress"]
        for target in rule["to"]
        if "podSelector" in target and "namespaceSelector" not in target
    ]
    assert to_pods == [
        (redis_service["spec"]["selector"], [{"protocol": "TCP", "port": store_url.port}])
    ]


def test_the_shipped_catalog_is_a_catalog(objects: list[dict[str, Any]], tmp_path: Path) -> None:
    catalog = next(o for o in by_kind(objects, "ConfigMap") if "catalog.yaml" in o["data"])
    path = tmp_path / "catalog.yaml"
    path.write_text(catalog["data"]["catalog.yaml"])
    shipped = ImageCatalog.load(path).enabled()
    assert [image.id for image in shipped] == ["debian-base", "python", "base"]
    # The E2B SDK's default template needs sudo: only it may gain privileges.
    assert [image.id for image in shipped if image.allow_setuid] == ["base"]


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec", {})
    if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
        return dict(spec["template"]["spec"])
    if obj["kind"] == "CronJob":
        return dict(spec["jobTemplate"]["spec"]["template"]["spec"])
    if obj["kind"] == "Pod":
        return dict(spec)
    return None


def test_the_settings_are_valid_settings_for_the_kubernetes_provider(
    objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a replica's environment holds (ConfigMap, then the container's own env)
    loads as Settings: a typo in a SIESTA_* name would stop every replica."""
    deployment = one(objects, "Deployment", "siesta-runtime")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    settings = _settings_of(objects, container, monkeypatch)
    assert isinstance(settings.provider, KubernetesProviderSettings)
    assert isinstance(settings.store, RedisStoreSettings)
    assert settings.pool.active is False
    assert settings.egress.key is not None and settings.egress.proxy_url
    proxy = one(objects, "Deployment", "siesta-egress")
    (proxy_container,) = proxy["spec"]["template"]["spec"]["containers"]
    proxy_settings = _settings_of(objects, proxy_container, monkeypatch)
    assert proxy_settings.egress == settings.egress
    assert proxy_settings.store == settings.store  # where deletions revoke credentials


def _settings_of(
    objects: list[dict[str, Any]], container: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Settings:
    (source,) = container["envFrom"]
    settings_map = one(objects, "ConfigMap", source["configMapRef"]["name"])
    for name in [n for n in os.environ if n.startswith("SIESTA_")]:
        monkeypatch.delenv(name)
    for name, value in settings_map["data"].items():
        monkeypatch.setenv(name, value)
    for variable in container.get("env", []):
        # Secrets and field references: any value long enough for a key.
        value = variable.get("value", "from-the-cluster-0123456789-0123456789")
        monkeypatch.setenv(variable["name"], value)
    return Settings()
