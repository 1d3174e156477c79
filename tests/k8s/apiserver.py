"""A Kubernetes API server double, for the Kubernetes provider's tests.

No Kubernetes API server can be installed on our machines (none is packaged for
Debian, PyPI or npm), so the provider is tested against this: a real HTTP and
websocket server speaking the part of the core/v1 API the provider uses, on the
same paths, with the same status objects, watch streams and attach protocol.

What makes it worth testing against:

- every body the provider sends (pods, claims, delete options, patched claims) is
  validated against the Kubernetes OpenAPI schemas of ``SCHEMA_VERSION``, strict
  (unknown fields are errors), as kubernetes-validate ships them; a body that
  fails is refused with 422 as a real server would, and kept in ``rejected``;
- pods run: each is a Docker container made from the pod's spec (image, stdin,
  limits, capabilities, privilege escalation, user, working dir, the claim as a
  volume, a RuntimeClass as the engine runtime ``runtime_classes`` maps it to), so
  the agent inside is the real one, the attach websocket is bridged to the
  container's real stdin and stdout, and the exec websocket to a Docker exec;
- pods and claims go through the states a kubelet and controllers give them
  (Pending, Running, terminating with a deletion timestamp, gone; claims protected
  while a pod uses them), with resource versions, watches from a version, and
  ``410 Gone`` for versions no longer kept;
- faults a cluster has can be switched on: an image that cannot be pulled, a pod
  the scheduler cannot place, a quota that refuses pods, a Role without exec.

What it is not: a scheduler, admission chain, RBAC, network policy, storage
provisioner or kubelet. Those have never run against the provider; docs/guides/kubernetes.md
lists them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import docker.errors
import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import uvicorn
from referencing import Registry, Resource
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from runtime.providers.docker.channels import DockerStreamFrames

SCHEMA_VERSION = "1.32.0"
SCHEMAS = (
    Path(kubernetes_validate.__file__).parent
    / "kubernetes-json-schema"
    / f"v{SCHEMA_VERSION}-local-strict"
)
DOUBLE_LABEL = "siesta.k8s-double"
"""On every container and volume the double makes (its id): clean-up finds them."""
KEPT_EVENTS = 10_000
KUBERNETES_NAMESPACE = "siesta-test"
"""Where the tests' Kubernetes provider makes its pods."""
CHANNEL_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")

Obj = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str) -> JSONResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return JSONResponse(body, status_code=code)


def schema_errors(schema_file: str, obj: Obj) -> list[str]:
    """What kubernetes_validate.validate checks, for any schema file (DeleteOptions
    has no ``kind``/``apiVersion`` it could look the file up by), every error."""
    schema = json.loads((SCHEMAS / schema_file).read_text())
    definitions = json.loads((SCHEMAS / "_definitions.json").read_text())
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(definitions) @ registry
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    return [
        f"{'.'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in validator.iter_errors(obj)
    ]


def matches(obj: Obj, label_selector: str | None, field_selector: str | None) -> bool:
    """Equality-based selectors (``a=b,c=d``), the only kind the provider sends."""
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, (label_selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    for term in filter(None, (field_selector or "").split(",")):
        key, _, value = term.partition("=")
        if key != "metadata.name":
            msg = f"field selector {key} is not supported by the double"
            raise ValueError(msg)
        if obj["metadata"]["name"] != value:
            return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def quantity_bytes(value: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return int(float(value[: -len(suffix)]) * factor)
    return int(value)


def quantity_nano_cpus(value: str) -> int:
    if value.endswith("m"):
        return int(value[:-1]) * 1_000_000
    return int(float(value) * 1e9)


@dataclass
class Faults:
    """Cluster behaviour the tests switch on."""

    unpullable_images: set[str] = field(default_factory=set)
    unschedulable: bool = False
    pod_quota_exceeded: bool = False
    exec_forbidden: bool = False
    """Every exec refused with 403, as for a Role without ``pods/exec``."""


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    content_type: str = ""
    body: Any = None


class ApiServerDouble:
    def __init__(self, docker_client: docker.DockerClient, labels: dict[str, str]) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.docker = docker_client
        self.labels = {**labels, DOUBLE_LABEL: self.id}
        self.faults = Faults()
        self.runtime_classes: dict[str, str] = {}
        """RuntimeClass name: the engine runtime its handler is (``runsc``); a pod of
        a class not here runs on the engine's default."""
        self.requests: list[Recorded] = []
        self.rejected: list[str] = []
        """Every body refused by schema validation: a test expects none."""
        self.pods: dict[tuple[str, str], Obj] = {}
        self.claims: dict[tuple[str, str], Obj] = {}
        self.events: list[tuple[int, str, str, Obj]] = []
        """(resource version, kind, event type, object) of pods, oldest first."""
        self.version = 1000
        self.lock = threading.RLock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- running ------------------------------------------------------------------------

    def start(self) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self.app(), log_level="warning", ws="wsproto", lifespan="off", loop="asyncio"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                msg = "the API server double did not start"
                raise RuntimeError(msg)
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self.remove_everything()

    def remove_everything(self) -> None:
        label = f"{DOUBLE_LABEL}={self.id}"
        for container in self.docker.containers.list(all=True, filters={"label": label}):
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True, v=True)
        for volume in self.docker.volumes.list(filters={"label": label}):
            with contextlib.suppress(docker.errors.APIError):
                volume.remove(force=True)

    def app(self) -> Starlette:
        pods = "/api/v1/namespaces/{namespace}/pods"
        claims = "/api/v1/namespaces/{namespace}/persistentvolumeclaims"
        return Starlette(
            routes=[
                Route("/version", self.version_info),
                Route(pods, self.pod_collection, methods=["GET", "POST"]),
                Route(pods + "/{name}", self.pod_item, methods=["GET", "DELETE"]),
                WebSocketRoute(pods + "/{name}/attach", self.attach),
                WebSocketRoute(pods + "/{name}/exec", self.exec),
                Route(claims, self.claim_collection, methods=["GET", "POST"]),
                Route(claims + "/{name}", self.claim_item, methods=["GET", "DELETE", "PATCH"]),
            ]
        )

    # -- bookkeeping --------------------------------------------------------------------

    def _next_version(self) -> str:
        self.version += 1
        return str(self.version)

    def _record(self, kind: str, event: str, obj: Obj) -> None:
        """Under the lock: a new version of ``obj``, and its watch event."""
        obj["metadata"]["resourceVersion"] = self._next_version()
        if kind == "pod":
            self.events.append((self.version, kind, event, copy.deepcopy(obj)))
            del self.events[:-KEPT_EVENTS]

    async def _request(self, request: Request) -> Any:
        body: Any = None
        raw = await request.body()
        if raw:
            body = json.loads(raw)
        self.requests.append(
            Recorded(
                request.method,
                request.url.path,
                dict(request.query_params),
                request.headers.get("content-type", ""),
                body,
            )
        )
        return body

    def _invalid(self, kind: str, schema_file: str, obj: Obj) -> JSONResponse | None:
        errors = schema_errors(schema_file, obj)
        if not errors:
            return None
        message = f"{kind} is invalid: " + "; ".join(errors)
        self.rejected.append(message)
        return status(422, "Invalid", message)

    # -- endpoints ----------------------------------------------------------------------

    async def version_info(self, request: Request) -> Response:
        await self._request(request)
        version = {
            "major": "1",
            "minor": "32",
            "gitVersion": "v1.32.0-siesta-double",
            "gitCommit": "0" * 40,
            "gitTreeState": "clean",
            "buildDate": "2026-11-30T00:00:00Z",
            "goVersion": "go1.23.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }
        return JSONResponse(version)

    async def pod_collection(self, request: Request) -> Response:
        body = await self._request(request)
        namespace = request.path_params["namespace"]
        if request.method == "POST":
            return self._create_pod(namespace, body)
        return await self._list("pod", self.pods, namespace, request)

    async def claim_collection(self, request: Request) -> Response:
        body = await self._request(request)
        namespace = request.path_params["namespace"]
        if request.method == "POST":
            return self._create_claim(namespace, body)
        return await self._list("claim", self.claims, namespace, request)

    async def _list(
        self, kind: str, store: dict[tuple[str, str], Obj], namespace: str, request: Request
    ) -> Response:
        query = request.query_params
        labels, fields = query.get("labelSelector"), query.get("fieldSelector")
        if query.get("watch") in ("true", "1"):
            if kind != "pod":
                return status(405, "MethodNotAllowed", "the double watches pods only")
            return StreamingResponse(
                self._watch(namespace, labels, fields, query), media_type="application/json"
            )
        with self.lock:
            items = [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(store.items())
                if ns == namespace and matches(obj, labels, fields)
            ]
            version = str(self.version)
        list_kind = "PodList" if kind == "pod" else "PersistentVolumeClaimList"
        return JSONResponse(
            {
                "kind": list_kind,
                "apiVersion": "v1",
                "metadata": {"resourceVersion": version},
                "items": items,
            }
        )

    async def _watch(
        self, namespace: str, labels: str | None, fields: str | None, query: Any
    ) -> AsyncIterator[bytes]:
        timeout = float(query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        since = query.get("resourceVersion")
        with self.lock:
            if since in (None, "", "0"):
                # No version: the current objects as ADDED, then what changes.
                backlog = [
                    ("ADDED", copy.deepcopy(obj))
                    for (ns, _), obj in sorted(self.pods.items())
                    if ns == namespace and matches(obj, labels, fields)
                ]
                position = self.version
            else:
                position = int(since)
                oldest = self.events[0][0] if self.events else self.version
                if position < oldest - 1:
                    gone = {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "Expired",
                        "code": 410,
                        "message": f"too old resource version: {position} ({oldest})",
                    }
                    backlog = [("ERROR", gone)]
                else:
                    backlog = []
        for event_type, obj in backlog:
            yield (json.dumps({"type": event_type, "object": obj}) + "\n").encode()
        if backlog and backlog[0][0] == "ERROR":
            return
        while time.monotonic() < deadline:
            with self.lock:
                fresh = [
                    (version, event_type, obj)
                    for version, _, event_type, obj in self.events
                    if version > position
                    and obj["metadata"]["namespace"] == namespace
                    and matches(obj, labels, fields)
                ]
                position = self.version
            for _, event_type, obj in fresh:
                yield (json.dumps({"type": event_type, "object": obj}) + "\n").encode()
            await asyncio.sleep(0.01)

    def _create_pod(self, namespace: str, body: Obj) -> Response:
        invalid = self._invalid("Pod", "pod-v1.json", body)
        if invalid is not None:
            return invalid
        if self.faults.pod_quota_exceeded:
            return status(
                403,
                "Forbidden",
                f'pods "{body["metadata"]["name"]}" is forbidden: exceeded quota: sandboxes, '
                "requested: pods=1, used: pods=10, limited: pods=10",
            )
        name = body["metadata"]["name"]
        with self.lock:
            if (namespace, name) in self.pods:
                return status(409, "AlreadyExists", f'pods "{name}" already exists')
            pod = copy.deepcopy(body)
            pod["metadata"] |= {
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
            }
            pod["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
            self.pods[(namespace, name)] = pod
            self._record("pod", "ADDED", pod)
            created = copy.deepcopy(pod)
        threading.Thread(target=self._kubelet_start, args=(namespace, name), daemon=True).start()
        return JSONResponse(created, status_code=201)

    async def pod_item(self, request: Request) -> Response:
        body = await self._request(request)
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        with self.lock:
            pod = self.pods.get((namespace, name))
            if pod is None:
                return status(404, "NotFound", f'pods "{name}" not found')
            if request.method == "GET":
                return JSONResponse(copy.deepcopy(pod))
            options = body or {}
            invalid = self._invalid("DeleteOptions", "deleteoptions-meta-v1.json", options)
            if invalid is not None:
                return invalid
            spec_grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
            grace = options.get("gracePeriodSeconds", spec_grace)
            if "deletionTimestamp" not in pod["metadata"]:
                pod["metadata"]["deletionTimestamp"] = now()
                pod["metadata"]["deletionGracePeriodSeconds"] = grace
                self._record("pod", "MODIFIED", pod)
                threading.Thread(
                    target=self._kubelet_stop, args=(namespace, name, grace), daemon=True
                ).start()
            return JSONResponse(copy.deepcopy(pod))

    def _create_claim(self, namespace: str, body: Obj) -> Response:
        invalid = self._invalid("PersistentVolumeClaim", "persistentvolumeclaim-v1.json", body)
        if invalid is not None:
            return invalid
        name = body["metadata"]["name"]
        with self.lock:
            if (namespace, name) in self.claims:
                message = f'persistentvolumeclaims "{name}" already exists'
                return status(409, "AlreadyExists", message)
            claim = copy.deepcopy(body)
            claim["metadata"] |= {
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
                "finalizers": ["kubernetes.io/pvc-protection"],
            }
            claim["spec"]["volumeName"] = f"pvc-{claim['metadata']['uid']}"
            claim["status"] = {
                "phase": "Bound",
                "accessModes": claim["spec"]["accessModes"],
                "capacity": claim["spec"]["resources"]["requests"],
            }
            self.docker.volumes.create(self._volume(namespace, name), labels=self.labels)
            self.claims[(namespace, name)] = claim
            self._record("claim", "ADDED", claim)
            return JSONResponse(copy.deepcopy(claim), status_code=201)

    async def claim_item(self, request: Request) -> Response:
        body = await self._request(request)
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        with self.lock:
            claim = self.claims.get((namespace, name))
            if claim is None:
                return status(404, "NotFound", f'persistentvolumeclaims "{name}" not found')
            if request.method == "GET":
                return JSONResponse(copy.deepcopy(claim))
            if request.method == "PATCH":
                return self._patch_claim(claim, request.headers.get("content-type", ""), body)
            invalid = self._invalid("DeleteOptions", "deleteoptions-meta-v1.json", body or {})
            if invalid is not None:
                return invalid
            claim["metadata"].setdefault("deletionTimestamp", now())
            self._record("claim", "MODIFIED", claim)
            answer = copy.deepcopy(claim)
            self._release_claims()
            return JSONResponse(answer)

    def _patch_claim(self, claim: Obj, content_type: str, patch: Any) -> Response:
        kind = content_type.split(";")[0].strip()
        if kind not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if kind == "application/json-patch+json" and isinstance(patch, list):
                return status(415, "UnsupportedMediaType", "the double takes merge patches only")
            return status(
                400,
                "BadRequest",
                f"the body of a {kind or 'patch without a content type'} request is not "
                "what that patch type needs",
            )
        patched = merge_patch(claim, patch)
        invalid = self._invalid("PersistentVolumeClaim", "persistentvolumeclaim-v1.json", patched)
        if invalid is not None:
            return invalid
        if patched["spec"] != claim["spec"]:
            return status(422, "Invalid", "spec is immutable after creation except resources")
        claim.clear()
        claim.update(patched)
        self._record("claim", "MODIFIED", claim)
        return JSONResponse(copy.deepcopy(claim))

    def _release_claims(self) -> None:
        """Under the lock: claims being deleted go once no pod uses them
        (the pvc-protection finalizer)."""
        used = {
            (ns, volume["persistentVolumeClaim"]["claimName"])
            for (ns, _), pod in self.pods.items()
            for volume in pod["spec"].get("volumes") or []
            if "persistentVolumeClaim" in volume
        }
        for key, claim in list(self.claims.items()):
            if "deletionTimestamp" in claim["metadata"] and key not in used:
                del self.claims[key]
                self._record("claim", "DELETED", claim)
                with contextlib.suppress(docker.errors.APIError):
                    self.docker.volumes.get(self._volume(*key)).remove(force=True)

    # -- the kubelet ------------------------------------------------------------------------

    def _volume(self, namespace: str, claim: str) -> str:
        return f"k8s-{self.id}-{namespace}-{claim}"

    def _container(self, namespace: str, pod: str) -> str:
        return f"k8s-{self.id}-{namespace}-{pod}"

    def _update_pod(self, namespace: str, name: str, change: Callable[[Obj], None]) -> bool:
        with self.lock:
            pod = self.pods.get((namespace, name))
            if pod is None or "deletionTimestamp" in pod["metadata"]:
                return False
            change(pod)
            self._record("pod", "MODIFIED", pod)
            return True

    def _kubelet_start(self, namespace: str, name: str) -> None:
        with self.lock:
            pod = copy.deepcopy(self.pods[(namespace, name)])
        container = pod["spec"]["containers"][0]
        if self.faults.unschedulable:
            self._update_pod(namespace, name, _unschedulable)
            return
        self._update_pod(namespace, name, _scheduled)
        if container["image"] in self.faults.unpullable_images or not self._image_exists(
            container["image"]
        ):
            self._update_pod(namespace, name, _waiting(container, "ErrImagePull"))
            return
        try:
            self._run_container(namespace, name, pod)
        except docker.errors.APIError as exc:
            message = str(exc.explanation or exc)
            self._update_pod(namespace, name, _waiting(container, "CreateContainerError", message))
            return
        if not self._update_pod(namespace, name, _running(container)):
            # Deleted while starting: the stop that was queued finds no container yet.
            with contextlib.suppress(docker.errors.APIError):
                self.docker.api.remove_container(self._container(namespace, name), force=True)

    def _image_exists(self, image: str) -> bool:
        try:
            self.docker.images.get(image)
        except docker.errors.ImageNotFound:
            return False
        return True

    def _run_container(self, namespace: str, name: str, pod: Obj) -> None:
        """The pod's spec as Docker options (what a container runtime makes of it)."""
        spec = pod["spec"]
        container = spec["containers"][0]
        security = container.get("securityContext") or {}
        capabilities = security.get("capabilities") or {}
        limits = (container.get("resources") or {}).get("limits") or {}
        binds: dict[str, Mapping[str, str]] = {}
        for mount in container.get("volumeMounts") or []:
            volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
            claim = volume["persistentVolumeClaim"]["claimName"]
            binds[self._volume(namespace, claim)] = {"bind": mount["mountPath"], "mode": "rw"}
        api = self.docker.api
        host_config = api.create_host_config(
            binds=binds,
            mem_limit=quantity_bytes(limits["memory"]) if "memory" in limits else None,
            nano_cpus=quantity_nano_cpus(limits["cpu"]) if "cpu" in limits else None,
            cap_drop=capabilities.get("drop"),
            cap_add=capabilities.get("add"),
            security_opt=(
                ["no-new-privileges"] if security.get("allowPrivilegeEscalation") is False else None
            ),
            privileged=bool(security.get("privileged")),
            # A NetworkPolicy that lets nothing out, as k8s/base has for sandboxes.
            network_mode="none",
            # A kubelet's pid limit: the double's host must survive a fork bomb too.
            pids_limit=4096,
            restart_policy={"Name": "always"} if spec.get("restartPolicy") == "Always" else None,
            runtime=self.runtime_classes.get(spec.get("runtimeClassName", "")),
        )
        config = api.create_container_config(
            container["image"],
            container.get("command"),
            hostname=spec.get("hostname", name),
            labels={**self.labels, "siesta.k8s-pod": name},
            working_dir=container.get("workingDir"),
            user=str(security["runAsUser"]) if "runAsUser" in security else None,
            host_config=host_config,
            stdin_open=bool(container.get("stdin")),
            tty=bool(container.get("tty")),
        )
        config["StdinOnce"] = bool(container.get("stdinOnce"))
        api.create_container_from_config(config, name=self._container(namespace, name))  # type: ignore[no-untyped-call]
        api.start(self._container(namespace, name))

    def _kubelet_stop(self, namespace: str, name: str, grace: int) -> None:
        with contextlib.suppress(docker.errors.APIError):
            self.docker.api.stop(self._container(namespace, name), timeout=grace)
        with contextlib.suppress(docker.errors.APIError):
            self.docker.api.remove_container(self._container(namespace, name), force=True, v=True)
        with self.lock:
            pod = self.pods.pop((namespace, name), None)
            if pod is not None:
                self._record("pod", "DELETED", pod)
            self._release_claims()

    def vanish_pod(self, namespace: str, name: str) -> None:
        """A pod gone without anyone deleting it (its node was lost)."""
        self._kubelet_stop(namespace, name, 0)

    def fail_pod(self, namespace: str, name: str) -> None:
        """A pod whose node was lost and that stays behind as ``Failed`` until someone
        deletes it (what the node controller leaves)."""
        with contextlib.suppress(docker.errors.APIError):
            self.docker.api.remove_container(self._container(namespace, name), force=True, v=True)

        def change(pod: Obj) -> None:
            container = pod["spec"]["containers"][0]
            state = {"terminated": {"exitCode": 137, "reason": "NodeLost", "finishedAt": now()}}
            pod["status"] |= {
                "phase": "Failed",
                "reason": "NodeLost",
                "message": "the node double-node was lost",
                "containerStatuses": [_container_status(container, state, ready=False)],
            }

        self._update_pod(namespace, name, change)

    # -- attach and exec -------------------------------------------------------------------

    async def attach(self, websocket: WebSocket) -> None:
        """The container's stdin, stdout and stderr (a Docker attach)."""
        self._record_stream(websocket)
        container = await self._accept(websocket)
        if container is None:
            return
        attached = self.docker.api.attach_socket(
            container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        await _bridge(websocket, attached._sock)
        await _end(websocket, {"status": "Success"})

    async def exec(self, websocket: WebSocket) -> None:
        """A process started in the container (a Docker exec), its exit code in the
        closing status as a kubelet gives it."""
        self._record_stream(websocket)
        command = websocket.query_params.getlist("command")
        if self.faults.exec_forbidden or not command:
            await websocket.close(code=1008)  # 403
            return
        container = await self._accept(websocket)
        if container is None:
            return
        api = self.docker.api
        try:
            exec_id = api.exec_create(container, command, stdin=True, tty=False)["Id"]
            started = api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            await _end(websocket, {"status": "Failure", "message": str(exc.explanation)})
            return
        raw: socket.socket = getattr(started, "_sock")  # noqa: B009 (not in the stubs)
        await _bridge(websocket, raw)
        code = await asyncio.to_thread(self._exit_code, exec_id)
        if code == 0:
            await _end(websocket, {"status": "Success"})
            return
        await _end(
            websocket,
            {
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: exit code {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            },
        )

    def _record_stream(self, websocket: WebSocket) -> None:
        query = websocket.query_params
        self.requests.append(Recorded("GET", websocket.url.path, dict(query)))

    def _exit_code(self, exec_id: str) -> int:
        deadline = time.monotonic() + 5
        while True:
            state = self.docker.api.exec_inspect(exec_id)
            if not state["Running"] or time.monotonic() > deadline:
                return int(state["ExitCode"] or 0)
            time.sleep(0.01)

    async def _accept(self, websocket: WebSocket) -> str | None:
        """The pod's container, once the websocket is accepted; ``None`` (refused)
        unless the pod runs and the request names its container, without a tty."""
        namespace = websocket.path_params["namespace"]
        name = websocket.path_params["name"]
        query = websocket.query_params
        with self.lock:
            pod = self.pods.get((namespace, name))
            running = pod is not None and pod["status"].get("phase") == "Running"
            container = pod["spec"]["containers"][0] if pod else None
        if (
            not running
            or container is None
            or query.get("container", container["name"]) != container["name"]
            or query.get("tty") == "true"
        ):
            await websocket.close(code=1008)  # the handshake fails, as a 4xx would
            return None
        offered = list(websocket.scope.get("subprotocols") or [])
        protocol = next((p for p in CHANNEL_PROTOCOLS if p in offered), None)
        if protocol is None:
            await websocket.close(code=1002)
            return None
        await websocket.accept(subprotocol=protocol)
        return self._container(namespace, name)


async def _bridge(websocket: WebSocket, raw: socket.socket) -> None:
    """Channel messages to and from a Docker attach or exec socket, until it ends."""
    raw.setblocking(False)
    loop = asyncio.get_running_loop()
    upstream = asyncio.ensure_future(_client_to_container(websocket, raw, loop))
    try:
        await _container_to_client(raw, websocket, loop)
    finally:
        upstream.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await upstream
        raw.close()


async def _end(websocket: WebSocket, outcome: Obj) -> None:
    """The stream's status on channel 3, and the close."""
    with contextlib.suppress(Exception):
        body = {"metadata": {}, **outcome}
        await websocket.send_bytes(b"\x03" + json.dumps(body).encode())
        await websocket.close()


async def _client_to_container(
    websocket: WebSocket, raw: socket.socket, loop: asyncio.AbstractEventLoop
) -> None:
    with contextlib.suppress(WebSocketDisconnect, OSError):
        while True:
            message = await websocket.receive_bytes()
            if message[:1] == b"\x00":
                await loop.sock_sendall(raw, message[1:])
    with contextlib.suppress(OSError):
        raw.shutdown(socket.SHUT_RDWR)  # the client went: the attach ends


async def _container_to_client(
    raw: socket.socket, websocket: WebSocket, loop: asyncio.AbstractEventLoop
) -> None:
    """Docker's multiplexed attach stream (8-byte headers) as channel messages."""
    frames = DockerStreamFrames()
    while True:
        try:
            data = await loop.sock_recv(raw, 256 * 1024)
        except OSError:
            return
        if not data:
            return
        for stream, chunk in frames.feed(data):
            try:
                await websocket.send_bytes(bytes([stream]) + chunk)
            except (WebSocketDisconnect, RuntimeError, OSError):
                return


def _scheduled(pod: Obj) -> None:
    pod["spec"]["nodeName"] = "double-node"
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}
    ]


def _unschedulable(pod: Obj) -> None:
    pod["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient memory.",
            "lastTransitionTime": now(),
        }
    ]


def _container_status(container: Obj, state: Obj, *, ready: bool) -> Obj:
    return {
        "name": container["name"],
        "image": container["image"],
        "imageID": "",
        "ready": ready,
        "started": ready,
        "restartCount": 0,
        "state": state,
    }


def _waiting(container: Obj, reason: str, message: str = "") -> Callable[[Obj], None]:
    def change(pod: Obj) -> None:
        text = message or f'failed to pull image "{container["image"]}": not found'
        state = {"waiting": {"reason": reason, "message": text}}
        pod["status"]["containerStatuses"] = [_container_status(container, state, ready=False)]

    return change


def _running(container: Obj) -> Callable[[Obj], None]:
    def change(pod: Obj) -> None:
        state = {"running": {"startedAt": now()}}
        pod["status"] |= {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "startTime": now(),
            "containerStatuses": [_container_status(container, state, ready=True)],
        }

    return change
