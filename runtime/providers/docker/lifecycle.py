"""The lifecycle of Docker sandboxes, through the ``docker`` SDK.

One sandbox is one container named ``siesta-<session id>`` with a Docker volume
of the same name mounted at ``/mnt/work``. Both carry, from their creation, the
deployment label (``siesta.deployment=<id>``) plus org, conversation, session
and image labels, so reconciliation finds everything this deployment created and
nothing else. Labels a container inherits from its image prove nothing: anyone
can start a container from our images.

Inside, the image's entry point ``siesta-agent`` is PID 1: this side opens one
attach stream to it per sandbox (``channels.py``) and drops it when the sandbox
stops; what goes over it is the other seam (``inside.py``).

Over 400 lines: one method per lifecycle step of the seam, each with the engine's
failure modes it maps; disks, layers, networks and snapshots are already apart.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import docker
import docker.errors

from runtime.core import metrics
from runtime.core.errors import (
    ConfigurationError,
    ImageUnavailable,
    ProvisioningFailed,
    SandboxBroken,
)
from runtime.providers.base import (
    DEPLOYMENT_LABEL,
    STOP_GRACE_SECONDS,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
    SandboxUsage,
    SnapshotArtifacts,
    SnapshotLeftover,
    WorkspaceInfo,
)
from runtime.providers.docker.channels import docker_channels
from runtime.providers.docker.containers import container_config
from runtime.providers.docker.disks import MOUNT_OPTIONS, LoopDisks
from runtime.providers.docker.errors import docker_errors, explain
from runtime.providers.docker.events import EngineEvents
from runtime.providers.docker.layers import WritableLayers
from runtime.providers.docker.metrics import read_usage
from runtime.providers.docker.snapshots import FOLDER, DockerSnapshots
from runtime.providers.docker.spares import SpareDisks
from runtime.providers.settings import SandboxSettings

RESTARTING_WAIT_SECONDS = 10.0
WORKSPACE_SIZE_LABEL = "siesta.workspace-size-mb"
LONE_IMAGE_AGE_SECONDS = 600
MEMORY_SNAPSHOTS_REFUSAL = (
    "the Docker provider's snapshots keep the sandbox's disks, not its memory or "
    "processes: keeping those needs CRIU checkpoints, which this runtime does not take "
    "(Debian 12's CRIU 3.17 cannot dump a process on kernels 6.10 and later, and with "
    "CRIU 4.2 a restore into a user-namespaced container fails); take a files-only "
    "snapshot instead"
)
"""Why ``keepMemory`` is refused (``snapshot_memory_not_supported``)."""
DEAD = (
    "the engine failed to remove its container (an engine stopped or a disk failed "
    "during the removal), which leaves it dead: marked for removal, never to start again"
)
"""Why a ``dead`` container is made again: the engine refuses to start it (409)."""

_STATES = {
    "running": SandboxState.RUNNING,
    "restarting": SandboxState.RUNNING,
    "paused": SandboxState.PAUSED,
    "created": SandboxState.STOPPED,
    "exited": SandboxState.STOPPED,
    "dead": SandboxState.STOPPED,
    "removing": SandboxState.MISSING,
}


class DockerLifecycle:
    """The lifecycle of Docker sandboxes (``SandboxLifecycle``)."""

    def __init__(
        self,
        settings: SandboxSettings,
        *,
        deployment_id: str,
        base_url: str | None = None,
        client: docker.DockerClient | None = None,
        network: str | None = None,
        disks: LoopDisks | None = None,
        trust_pem: str | None = None,
    ) -> None:
        self._settings = settings
        self._trust_pem = trust_pem
        self._network = network or settings.network
        self._disks = disks
        if disks is not None and (settings.workspace_size_mb or settings.container_disk_mb):
            disks.check()
        self._layers = (
            WritableLayers(disks) if disks is not None and settings.container_disk_mb else None
        )
        self._deployment_id = deployment_id
        self._spares = (
            SpareDisks(
                disks,
                [settings.workspace_size_mb, settings.container_disk_mb if self._layers else 0],
                settings.spare_disks,
            )
            if disks is not None
            else None
        )
        with docker_errors():
            self._client = client or (
                docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
            )
        self.api: docker.APIClient = self._client.api
        """The engine's API (the engine-exec fallback of ``inside.py`` uses it too)."""
        if disks is not None:
            with docker_errors():
                info = self.api.info()
            disks.owner = remapped_root(info)
            if self._layers is not None and info.get("Driver") != "overlay2":
                msg = (
                    f"SIESTA_SANDBOX__CONTAINER_DISK_MB needs the overlay2 storage driver "
                    f"(this engine uses {info.get('Driver')}); set it to 0"
                )
                raise ConfigurationError(msg)
        self.channels = docker_channels(self.api, settings.channel_stall_seconds)
        disk_dir = disks.directory if disks is not None else settings.disk_dir / deployment_id
        self._snapshots = DockerSnapshots(
            self.api, disks, deployment_id, disk_dir / FOLDER, self._layers
        )
        if disks is not None:
            _ = self._snapshots.copy_on_write  # probed at start: said once, in the log
        """The open agent channels of this instance, one per sandbox (``inside.py``)."""
        # An engine restart leaves the pooled connections dead: drop them with the stream.
        self._events = EngineEvents(self.api, self._label_filters(), self.api.close)

    def ping(self) -> None:
        with docker_errors():
            self.api.ping()

    def prepare_ahead(self) -> None:
        """Blank disks made ahead (``spares.py``)."""
        if self._spares is not None:
            self._spares.start()

    def close(self) -> None:
        if self._spares is not None:
            self._spares.stop()
        self._events.close()
        self.channels.close()
        self._client.close()

    def sandbox_id_for(self, session_id: str) -> str:
        return f"siesta-{session_id}"

    def create(self, spec: SandboxSpec) -> str:
        name = self.sandbox_id_for(spec.session_id)
        labels = self._labels(spec)
        try:
            with docker_errors(), _provisioning_errors(spec.image):
                with metrics.create_phase("workspace"):
                    self._create_workspace(name, labels, spec.workspace_size_mb)
                self._create_container(name, spec, labels)
        except BaseException:
            self.destroy(name)
            raise
        return name

    def recreate(self, spec: SandboxSpec) -> str:
        name = self.sandbox_id_for(spec.session_id)
        self._remove_container(name)
        try:
            with docker_errors(), _provisioning_errors(spec.image):
                if self._disks is not None and self._disks.image(name).exists():
                    self._disks.attach(name)
                self._create_container(name, spec, self._labels(spec))
        except BaseException:
            self._remove_container(name)  # never the workspace
            raise
        return name

    def workspace_exists(self, sandbox_id: str) -> bool:
        with docker_errors():
            try:
                volume = self.api.inspect_volume(sandbox_id)
            except docker.errors.NotFound:
                return False
        if WORKSPACE_SIZE_LABEL not in (volume.get("Labels") or {}):
            return True
        # A fixed-size workspace is its disk image; the volume only names its device.
        return self._disks is not None and self._disks.image(sandbox_id).exists()

    def _labels(self, spec: SandboxSpec) -> dict[str, str]:
        return {**self._settings.extra_labels, **spec.labels, DEPLOYMENT_LABEL: self._deployment_id}

    def _create_container(
        self,
        name: str,
        spec: SandboxSpec,
        labels: dict[str, str],
        layer_from: tuple[Path, bool] | None = None,
    ) -> None:
        """Create and start it; its writable layer a blank disk of its own, or
        (``layer_from``: a snapshot's clone, and whether to consume it) that clone."""
        config = container_config(
            self.api,
            self._settings,
            self._network,
            spec.image,
            name,
            labels,
            spec.runtime,
            spec.allow_setuid,
            trust_pem=self._trust_pem,
        )
        with metrics.create_phase("container"):
            self.api.create_container_from_config(config, name=name)  # type: ignore[no-untyped-call]
        if self._layers is not None:
            with metrics.create_phase("layer"):
                if layer_from is not None:
                    source, consume = layer_from
                    self._layers.adopt(name, self._layer_folder(name), source, consume=consume)
                else:
                    size = self._settings.container_disk_mb
                    self._layers.create(name, size, self._layer_folder(name))
        with metrics.create_phase("start"):
            self.api.start(name)

    def _create_workspace(self, name: str, labels: dict[str, str], size_mb: int | None) -> None:
        size = self._settings.workspace_size_mb if size_mb is None else size_mb
        if not size or self._disks is None:
            self._client.volumes.create(name=name, labels=labels)
            return
        device = self._disks.create(name, size)
        self._client.volumes.create(
            name=name,
            driver="local",
            driver_opts={"type": "ext4", "device": device, "o": MOUNT_OPTIONS},
            labels={**labels, WORKSPACE_SIZE_LABEL: str(size)},
        )

    def memory_snapshot_refusal(self) -> str | None:
        return MEMORY_SNAPSHOTS_REFUSAL

    def snapshot(self, sandbox_id: str, snapshot_id: str) -> SnapshotArtifacts:
        with docker_errors():
            return self._snapshots.take(sandbox_id, snapshot_id)

    def create_from_snapshot(
        self, spec: SandboxSpec, artifacts: SnapshotArtifacts, *, consume: bool = False
    ) -> str:
        name = self.sandbox_id_for(spec.session_id)
        spec = replace(spec, image=artifacts.image)
        labels = self._labels(spec)
        layer_from = None
        if artifacts.layer:
            if self._layers is None:
                msg = (
                    f"the snapshot {artifacts.snapshot_id} keeps its installed files on a "
                    "disk of their own, and this deployment gives sandboxes none "
                    "(SIESTA_SANDBOX__CONTAINER_DISK_MB=0)"
                )
                raise ProvisioningFailed(msg)
            if not Path(artifacts.layer).exists():
                msg = f"the snapshot {artifacts.snapshot_id} has no layer copy any more"
                raise ProvisioningFailed(msg)
            layer_from = (Path(artifacts.layer), consume)
        try:
            with docker_errors(), _provisioning_errors(spec.image):
                with metrics.create_phase("workspace"):
                    self._workspace_from(name, labels, artifacts, consume)
                self._create_container(name, spec, labels, layer_from)
        except BaseException:
            self.destroy(name)
            raise
        return name

    def _workspace_from(
        self, name: str, labels: dict[str, str], artifacts: SnapshotArtifacts, consume: bool
    ) -> None:
        if self._disks is None or Path(artifacts.workspace).is_dir():
            volume = self._client.volumes.create(name=name, labels=labels)
            folder = Path(str(volume.attrs["Mountpoint"]))
            self._snapshots.place_workspace(artifacts, folder, consume=consume)
            return
        self._disks.directory.mkdir(parents=True, exist_ok=True)
        self._snapshots.place_workspace(artifacts, self._disks.image(name), consume=consume)
        size_mb = artifacts.workspace_bytes // (1024 * 1024)
        self._client.volumes.create(
            name=name,
            driver="local",
            driver_opts={"type": "ext4", "device": self._disks.attach(name), "o": MOUNT_OPTIONS},
            labels={**labels, WORKSPACE_SIZE_LABEL: str(size_mb)},
        )

    def delete_snapshot(self, snapshot_id: str) -> bool:
        with docker_errors():
            return self._snapshots.delete(snapshot_id)

    def list_snapshot_leftovers(self) -> list[SnapshotLeftover]:
        with docker_errors():
            return self._snapshots.leftovers()

    def known_running(self, sandbox_id: str) -> bool:
        return self._events.trusted(sandbox_id) and self.channels.existing(sandbox_id) is not None

    def inspect(self, sandbox_id: str) -> SandboxInfo:
        snapshot = self._events.snapshot(sandbox_id)
        with docker_errors():
            try:
                attrs = self.api.inspect_container(sandbox_id)
            except docker.errors.NotFound:
                return SandboxInfo(sandbox_id, SandboxState.MISSING)
        status = str(attrs["State"]["Status"])
        labels = dict(attrs["Config"].get("Labels") or {})
        state = _STATES.get(status, SandboxState.STOPPED)
        if status == "running":
            self._events.trust(sandbox_id, snapshot)
        return SandboxInfo(sandbox_id, state, labels)

    def usage(self, sandbox_id: str) -> SandboxUsage:
        return read_usage(self.api, sandbox_id, layered=self._layers is not None)

    def pause(self, sandbox_id: str) -> None:
        with docker_errors():
            self.api.pause(sandbox_id)

    def unpause(self, sandbox_id: str) -> None:
        with docker_errors():
            self.api.unpause(sandbox_id)

    def stop(self, sandbox_id: str) -> None:
        self.channels.drop(sandbox_id)
        with docker_errors():
            self.api.stop(sandbox_id, timeout=STOP_GRACE_SECONDS)

    def start(self, sandbox_id: str) -> None:
        self.channels.drop(sandbox_id)  # a stream from before the stop is dead
        status = self._settled_status(sandbox_id)
        if status == "running":
            return  # the engine's restart policy was quicker
        if status == "dead":
            raise _dead(sandbox_id)
        try:
            if self._disks is not None and self._disks.image(sandbox_id).exists():
                self._disks.attach(sandbox_id)  # after a reboot the loop device is gone
            with docker_errors():
                if self._layers is not None and self._layers.exists(sandbox_id):
                    self._layers.ensure(sandbox_id, self._layer_folder(sandbox_id))
                self._start_container(sandbox_id)
        except ProvisioningFailed as exc:
            msg = f"the sandbox {sandbox_id} cannot be started any more: {exc.message}"
            raise SandboxBroken(msg) from exc

    def _start_container(self, sandbox_id: str) -> None:
        try:
            self.api.start(sandbox_id)
        except docker.errors.APIError as exc:
            if exc.status_code == 409 and "marked for removal" in explain(exc):
                raise _dead(sandbox_id) from exc  # it went dead since the look
            if exc.status_code != 500:
                raise
            # The engine could not make the container run (its layer or image is gone,
            # its mounts fail): the sandbox is made again around the same workspace.
            msg = f"the sandbox {sandbox_id} cannot be started any more: {explain(exc)}"
            raise SandboxBroken(msg) from exc

    def _settled_status(self, sandbox_id: str) -> str:
        """The container's status once the engine is not restarting it."""
        deadline = time.monotonic() + RESTARTING_WAIT_SECONDS
        while True:
            with docker_errors():
                status = str(self.api.inspect_container(sandbox_id)["State"]["Status"])
            if status != "restarting" or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    def destroy(self, sandbox_id: str) -> None:
        self._remove_container(sandbox_id)
        with docker_errors(), contextlib.suppress(docker.errors.NotFound):
            self.api.remove_volume(sandbox_id, force=True)
        if self._disks is not None:
            self._disks.remove(sandbox_id)
        self._events.forget(sandbox_id)

    def _remove_container(self, sandbox_id: str) -> None:
        """The container and its writable layer (its own disk too); not the workspace."""
        self.channels.drop(sandbox_id)
        if self._layers is not None:
            # The engine cannot delete the container's folder while our mounts are in it.
            with docker_errors():
                try:
                    self._layers.release(sandbox_id, self._layer_folder(sandbox_id))
                except docker.errors.NotFound:
                    self._layers.release(sandbox_id, None)
        with docker_errors(), contextlib.suppress(docker.errors.NotFound):
            self.api.remove_container(sandbox_id, force=True, v=True)
        if self._layers is not None:
            self._layers.remove(sandbox_id, None)

    def _layer_folder(self, sandbox_id: str) -> Path:
        """overlay2's folder of the container's writable layer (where its writes go);
        ``docker.errors.NotFound`` when there is no such container."""
        driver = self.api.inspect_container(sandbox_id)["GraphDriver"]
        return Path((driver.get("Data") or {})["UpperDir"]).parent

    def _label_filters(self) -> dict[str, Any]:
        extra = [f"{k}={v}" for k, v in self._settings.extra_labels.items()]
        return {"label": [f"{DEPLOYMENT_LABEL}={self._deployment_id}", *extra]}

    def list_sandboxes(self) -> list[SandboxInfo]:
        with docker_errors():
            containers = self.api.containers(all=True, filters=self._label_filters())
            inherited = self._images_claiming_ownership({str(c["ImageID"]) for c in containers})
        return [
            SandboxInfo(
                str(c["Names"][0]).lstrip("/"),
                _STATES.get(str(c["State"]), SandboxState.STOPPED),
                dict(c.get("Labels") or {}),
                float(c.get("Created") or 0),
            )
            for c in containers
            if str(c["ImageID"]) not in inherited
        ]

    def _images_claiming_ownership(self, image_ids: set[str]) -> set[str]:
        """Images that carry our deployment label themselves (say, committed from a
        sandbox): their containers may have inherited it, so it proves nothing."""
        claiming = set()
        for image_id in image_ids:
            try:
                attrs = self.api.inspect_image(image_id)  # type: ignore[no-untyped-call]
                labels = attrs["Config"].get("Labels") or {}
            except docker.errors.NotFound:
                continue
            if labels.get(DEPLOYMENT_LABEL) == self._deployment_id:
                claiming.add(image_id)
        return claiming

    def list_workspaces(self) -> list[WorkspaceInfo]:
        """Volumes, and workspace images whose volume is gone (a crash between the two):
        reconciliation removes what no session owns."""
        with docker_errors():
            volumes = self.api.volumes(filters=self._label_filters()).get("Volumes") or []
        listed = [
            WorkspaceInfo(str(v["Name"]), dict(v.get("Labels") or {}), _timestamp(v))
            for v in volumes
        ]
        if self._disks is not None:
            known = {workspace.name for workspace in listed}
            # An image without its volume is being created, or was left by a crash
            # during that; only a while later is it surely the second.
            settled = time.time() - LONE_IMAGE_AGE_SECONDS
            listed += [
                WorkspaceInfo(name, {DEPLOYMENT_LABEL: self._deployment_id}, created)
                for name, created in self._disks.images().items()
                if name not in known and created < settled
            ]
        return listed


def _dead(sandbox_id: str) -> SandboxBroken:
    """A ``dead`` container: the engine refuses to start it, so it is made again."""
    return SandboxBroken(f"the sandbox {sandbox_id} cannot be started any more: {DEAD}")


@contextlib.contextmanager
def _provisioning_errors(image: str) -> Iterator[None]:
    """While creating, every refusal of the engine is a provisioning failure."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        msg = f"base image {image} is not present on the Docker engine"
        raise ImageUnavailable(msg, imageRef=image) from exc
    except docker.errors.APIError as exc:
        msg = f"could not create the sandbox: {explain(exc)}"
        raise ProvisioningFailed(msg) from exc


def remapped_root(info: dict[str, Any]) -> tuple[int, int]:
    """Root of the sandboxes as the host sees it: with ``userns-remap`` the engine keeps
    its data in ``<root>/<uid>.<gid>``, and a new file system's root must be owned by
    that uid to be root's inside."""
    remapped = re.fullmatch(r"(\d+)\.(\d+)", Path(str(info.get("DockerRootDir", ""))).name)
    if remapped is None:
        return (0, 0)
    return int(remapped.group(1)), int(remapped.group(2))


def _timestamp(volume: dict[str, Any]) -> float:
    created = str(volume.get("CreatedAt") or "")
    try:  # e.g. 2026-11-30T11:04:05Z or with an offset
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
