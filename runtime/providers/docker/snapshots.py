"""Snapshots of Docker sandboxes: their disks cloned (or copied), at one instant.

A snapshot is two things taken at one instant, with the sandbox's processes frozen
(``docker pause``: the cgroup freezer) for both:

* the workspace: its disk image cloned with ``cp --sparse=always --reflink=auto``
  while its file system is frozen (``fsfreeze``). The pause alone keeps the
  sandbox's processes from writing, but not the kernel: the ext4 journal, lazy
  inode-table zeroing and discards go on under a paused container. A frozen file
  system is flushed and clean on disk, so the clone mounts without a journal replay.
  A workspace without a disk (``WORKSPACE_SIZE_MB=0``) is a folder, copied as one.
* the container's writable layer (what was installed, /tmp, /root): where it has a
  disk of its own (``layers.py``), that disk image is cloned the same way, frozen,
  and a sandbox made from the snapshot runs the source's base image over a clone of
  it (``WritableLayers.adopt``); without one, it is committed to an image
  ``siesta-snapshot:<id>`` (``docker commit``: a byte copy of the layer).

On a file system that clones by reference (XFS with reflink=1: ``scripts/setup.sh``
makes one for the disk folder) a clone costs O(extents), whatever the size, and the
copies share blocks until either side writes; elsewhere ``cp`` copies the bytes
(sparse), as ``copy_on_write`` in the artifacts says. Running processes and memory
are not kept: a sandbox made from a snapshot boots afresh on those files. The
copies live in ``<disk dir>/snapshots/``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors

from runtime.core import metrics
from runtime.core.errors import ProvisioningFailed, SandboxUnavailable
from runtime.providers.base import (
    CONVERSATION_LABEL,
    DEPLOYMENT_LABEL,
    ORG_LABEL,
    POOL_LABEL,
    SESSION_LABEL,
    SNAPSHOT_DEPLOYMENT_LABEL,
    SNAPSHOT_LABEL,
    SnapshotArtifacts,
    SnapshotLeftover,
)
from runtime.providers.docker.disks import LoopDisks, clone_file, clones_by_reference, run_tool
from runtime.providers.docker.layers import WritableLayers

REPOSITORY = "siesta-snapshot"
THAW_AFTER_SECONDS = 600
"""Longer than any copy of a workspace takes (10 GiB at 100 MB/s: under 2 minutes)."""
FOLDER = "snapshots"
LAYER_SUFFIX = ".layer.img"
"""A snapshot's clone of its source's writable layer: ``<id>.layer.img``."""
_CLEARED = (DEPLOYMENT_LABEL, POOL_LABEL, ORG_LABEL, CONVERSATION_LABEL, SESSION_LABEL)
"""The source's labels its image must not carry: a container made from it would
inherit them (and an image claiming the deployment makes its containers unlisted)."""

log = logging.getLogger(__name__)


class DockerSnapshots:
    def __init__(
        self,
        api: docker.APIClient,
        disks: LoopDisks | None,
        deployment_id: str,
        folder: Path,
        layers: WritableLayers | None = None,
    ) -> None:
        self._api = api
        self._disks = disks
        self._deployment_id = deployment_id
        self._folder = folder
        self._layers = layers
        self._clones: bool | None = None

    @property
    def copy_on_write(self) -> bool:
        """Whether the snapshots' folder clones files by reference (probed once)."""
        if self._clones is None:
            self._clones = clones_by_reference(self._folder)
            metrics.DISK_COPY_ON_WRITE.set(1 if self._clones else 0)
            if not self._clones:
                log.warning(
                    "the disk folder %s cannot clone files by reference: snapshots and "
                    "forks copy every byte of a sandbox's disks (seconds per GiB). Put it "
                    "on XFS with reflink=1 or btrfs (scripts/setup.sh makes one)",
                    self._folder,
                )
        return self._clones

    def take(self, sandbox_id: str, snapshot_id: str) -> SnapshotArtifacts:
        status = str(self._api.inspect_container(sandbox_id)["State"]["Status"])
        if status not in ("running", "paused"):
            msg = f"the sandbox {sandbox_id} is {status}: only a running one is snapshot"
            raise SandboxUnavailable(msg)
        self._folder.mkdir(parents=True, exist_ok=True)
        pausing = status == "running"
        if pausing:
            self._api.pause(sandbox_id)
        layer = ""
        try:
            workspace = self._copy_workspace(sandbox_id, snapshot_id)
            if self._layers is not None and self._layers.image(sandbox_id).exists():
                layer = self._clone_layer(sandbox_id, snapshot_id)
                image = str(self._api.inspect_container(sandbox_id)["Config"]["Image"])
            else:
                image = self._commit(sandbox_id, snapshot_id)
        except BaseException:
            self.delete(snapshot_id)
            raise
        finally:
            if pausing:
                self._api.unpause(sandbox_id)
        apparent, allocated = _sizes(Path(workspace))
        return SnapshotArtifacts(
            snapshot_id,
            image,
            workspace,
            workspace_bytes=apparent,
            workspace_allocated_bytes=allocated,
            image_bytes=_sizes(Path(layer))[1] if layer else self._layer_bytes(image),
            layer=layer,
            copy_on_write=self.copy_on_write,
        )

    def _clone_layer(self, sandbox_id: str, snapshot_id: str) -> str:
        assert self._layers is not None
        target = self._folder / f"{snapshot_id}{LAYER_SUFFIX}"
        mountpoint = self._layers.mountpoint(sandbox_id)
        if mountpoint.is_mount():
            with _frozen(str(mountpoint)):
                clone_file(self._layers.image(sandbox_id), target)
        else:  # a stopped sandbox's: nothing writes to it
            clone_file(self._layers.image(sandbox_id), target)
        return str(target)

    def _copy_workspace(self, sandbox_id: str, snapshot_id: str) -> str:
        mountpoint = str(self._api.inspect_volume(sandbox_id)["Mountpoint"])
        if self._disks is not None and self._disks.image(sandbox_id).exists():
            target = self._folder / f"{snapshot_id}.img"
            with _frozen(mountpoint):
                clone_file(self._disks.image(sandbox_id), target)
            return str(target)
        target = self._folder / f"{snapshot_id}.dir"
        target.mkdir()
        run_tool("cp", "-a", "--reflink=auto", f"{mountpoint}/.", f"{target}/")
        return str(target)

    def _commit(self, sandbox_id: str, snapshot_id: str) -> str:
        cleared = " ".join(f'{label}=""' for label in _CLEARED)
        changes = [
            f"LABEL {cleared}",
            f"LABEL {SNAPSHOT_LABEL}={snapshot_id} "
            f"{SNAPSHOT_DEPLOYMENT_LABEL}={self._deployment_id}",
        ]
        # Already paused: the layer and the workspace copy are of the same instant.
        self._api.commit(
            sandbox_id, repository=REPOSITORY, tag=snapshot_id, changes=changes, pause=False
        )
        return f"{REPOSITORY}:{snapshot_id}"

    def _layer_bytes(self, image: str) -> int:
        attrs: dict[str, Any] = self._api.inspect_image(image)  # type: ignore[no-untyped-call]
        parent = str(attrs.get("Parent") or "")
        base = 0
        if parent:
            with contextlib.suppress(docker.errors.NotFound):
                base = int(self._api.inspect_image(parent)["Size"])  # type: ignore[no-untyped-call]
        return max(0, int(attrs["Size"]) - base)

    def place_workspace(self, artifacts: SnapshotArtifacts, target: Path, *, consume: bool) -> None:
        """The snapshot's workspace copied (or, ``consume``: moved) to ``target``: a disk
        image file, or a volume's folder for a folder copy."""
        source = Path(artifacts.workspace)
        if not source.exists():
            msg = f"the snapshot {artifacts.snapshot_id} has no workspace copy any more"
            raise ProvisioningFailed(msg)
        if source.is_dir():
            run_tool("cp", "-a", "--reflink=auto", f"{source}/.", f"{target}/")
        elif consume:
            source.rename(target)
        else:
            making = target.with_name(f".{target.name}.new")
            clone_file(source, making)
            making.rename(target)

    def delete(self, snapshot_id: str) -> bool:
        for suffix in (LAYER_SUFFIX, ".img", ".dir"):
            path = self._folder / f"{snapshot_id}{suffix}"
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        try:
            self._api.remove_image(f"{REPOSITORY}:{snapshot_id}")
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
            return False  # sandboxes made from it run on it: clean-up comes back later
        return True

    def leftovers(self) -> list[SnapshotLeftover]:
        found: dict[str, float] = {}
        filters = {"label": [f"{SNAPSHOT_DEPLOYMENT_LABEL}={self._deployment_id}"]}
        for image in self._api.images(filters=filters):
            snapshot_id = (image.get("Labels") or {}).get(SNAPSHOT_LABEL)
            if snapshot_id:
                found[snapshot_id] = float(image.get("Created") or 0)
        if self._folder.is_dir():
            for path in self._folder.iterdir():
                name = path.name.removesuffix(LAYER_SUFFIX)
                if path.suffix in (".img", ".dir") and not name.startswith("."):
                    found.setdefault(Path(name).stem, path.stat().st_mtime)
        return [SnapshotLeftover(i, created) for i, created in sorted(found.items())]


@contextlib.contextmanager
def _frozen(mountpoint: str) -> Iterator[None]:
    """The file system flushed and frozen while the block runs. Should this process die
    meanwhile, or should the thaw fail, a detached watchdog thaws it after
    ``THAW_AFTER_SECONDS``: a workspace left frozen would hang every write in its
    sandbox."""
    tool = shutil.which("fsfreeze") or shutil.which("fsfreeze", path="/usr/sbin:/sbin")
    watchdog = subprocess.Popen(
        [
            "sh",
            "-c",
            f'sleep {THAW_AFTER_SECONDS}; exec "$0" --unfreeze "$1"',
            str(tool),
            mountpoint,
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    frozen = False
    try:
        run_tool("fsfreeze", "--freeze", mountpoint)
        frozen = True
        yield
    finally:
        if frozen and not _thawed(mountpoint):
            # Left to the watchdog: its thaw comes late, but a kill would leave the
            # workspace frozen (every write in the sandbox hanging) for good.
            log.error(
                "the workspace at %s could not be thawed: its watchdog thaws it within %s s",
                mountpoint,
                THAW_AFTER_SECONDS,
            )
            threading.Thread(target=watchdog.wait, name="thaw-watchdog", daemon=True).start()
        else:
            os.killpg(watchdog.pid, signal.SIGKILL)  # the shell and its sleep
            watchdog.wait()


def _thawed(mountpoint: str, attempts: int = 2) -> bool:
    """Whether ``fsfreeze --unfreeze`` succeeded (tried ``attempts`` times)."""
    for attempt in range(1, attempts + 1):
        try:
            run_tool("fsfreeze", "--unfreeze", mountpoint)
        except ProvisioningFailed as exc:
            log.warning("thawing %s failed (attempt %s): %s", mountpoint, attempt, exc.message)
        else:
            return True
    return False


def _sizes(path: Path) -> tuple[int, int]:
    """Apparent and allocated bytes of a file, or of a folder's files."""
    if path.is_file():
        stat = path.stat()
        return stat.st_size, stat.st_blocks * 512
    apparent = allocated = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                stat = os.lstat(os.path.join(folder, name))
                apparent += stat.st_size
                allocated += stat.st_blocks * 512
    return apparent, allocated
