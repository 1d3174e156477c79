"""Settings of sandboxes and of the providers that make them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.settings import DNS_LABEL_PATTERN, QUANTITY_PATTERN


class SandboxSettings(BaseModel):
    """Resources and hardening of every sandbox container."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """When false every sandbox function fails with ``sandbox_disabled``."""
    memory_limit_mb: int = Field(1024, ge=16)
    """Memory (and memory+swap) ceiling of one sandbox."""
    cpu_limit: float = Field(1.0, gt=0)
    """CPUs one sandbox may use (fractions allowed)."""
    pids_limit: int = Field(512, ge=16)
    """Processes/threads one sandbox may have: stops fork bombs."""
    network: str = "none"
    """Docker network of sandboxes; ``none`` means no network at all. Leave it: with
    an egress allowlist (``SIESTA_EGRESS__ALLOW``) the service makes and uses its own
    internal network."""
    extra_labels: dict[str, str] = Field(default_factory=dict)
    """Labels added to everything created, e.g. a deployment name (tests use it)."""
    provision_timeout_seconds: float = Field(60.0, gt=0)
    """How long creating and starting a sandbox may take."""
    channel_stall_seconds: float = Field(60.0, gt=0)
    """How long a sandbox's agent may take nothing the service sends, or send nothing a
    file operation waits for, before that call fails with ``sandbox_unavailable`` (its
    sandbox frozen mid-call, say); the next call opens a new channel. Commands are bounded
    by their own timeout instead (they may be silent for all of it)."""
    workspace_size_mb: int = Field(10240, ge=0)
    """Size of a sandbox's ``/mnt/work`` (Docker: its own ext4 file system; writing
    past it is ``ENOSPC``); 0: no limit (the workspace shares the engine's disk). A
    catalog image may set its own (``workspace_size_mb``)."""
    container_disk_mb: int = Field(10240, ge=0)
    """Size of what a sandbox writes outside ``/mnt/work`` (its writable layer:
    installed packages, ``/tmp``, ``/root``); Docker: a file system of its own under the
    container's overlay folders; 0: no limit."""
    spare_disks: int = Field(4, ge=0)
    """Docker: blank disk images of each size kept made ahead, so that making a sandbox
    formats no file system on its path (each is a sparse file: a few MB of host disk)."""
    disk_dir: Path = Path("/var/lib/siesta/disks")
    """Docker: sandbox disk images live in ``<this>/<deployment id>``: every instance of
    a deployment must see the same folder, and deployments never see each other's."""


class DockerProviderSettings(BaseModel):
    """Sandboxes as containers of one Docker engine."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["docker"] = "docker"
    base_url: str | None = None
    """Docker engine address; default is the environment (DOCKER_HOST or the socket)."""


class FakeProviderSettings(BaseModel):
    """Sandboxes as folders on the host, commands run on the host: tests only."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["fake"] = "fake"


class KubernetesProviderSettings(BaseModel):
    """Sandboxes as pods of a Kubernetes cluster, workspaces as PersistentVolumeClaims."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["kubernetes"] = "kubernetes"
    namespace: str = Field("default", pattern=DNS_LABEL_PATTERN)
    """Where sandbox pods and their claims are made (the service's own namespace in
    the manifests; the Role grants exactly that)."""
    api_url: str | None = None
    """An API server to use without credentials (``kubectl proxy``, a test double).
    Default: the in-cluster service account, else the kubeconfig."""
    kubeconfig: Path | None = None
    """A kubeconfig file (default: ``$KUBECONFIG`` or ``~/.kube/config``) when not in a cluster."""
    context: str | None = None
    """The kubeconfig context (default: its current one)."""
    runtime_class: str | None = None
    """RuntimeClass of sandbox pods, e.g. ``gvisor`` (k8s/examples/runtimeclass-gvisor.yaml)."""
    storage_class: str | None = None
    """StorageClass of workspace claims (default: the cluster's default class)."""
    workspace_size: str = Field("1Gi", pattern=QUANTITY_PATTERN)
    """Requested size of a workspace claim."""
    run_as_user: int | None = Field(None, ge=1)
    """Run the sandbox as this non-root uid, for images that allow it (the catalog's
    images install packages as root with a few capabilities, like on Docker)."""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Nodes sandbox pods may run on (e.g. a sandbox node pool)."""
    request_timeout_seconds: float = Field(30.0, gt=0)
    """How long one API request may take."""


ProviderSettings = Annotated[
    DockerProviderSettings | KubernetesProviderSettings | FakeProviderSettings,
    Field(discriminator="type"),
]
