"""A size limit on what a sandbox writes outside ``/mnt/work`` (packages, /tmp, /root).

Docker limits a container's writable layer only with overlay2 on XFS with project
quotas (``--storage-opt size``), which hosts like ours (ext4, and kernels without
quota support) cannot offer. So the writable layer gets a file system of its own:
after the engine creates the container, and before every start, the layer's folder
(the parent of overlay2's ``upperdir`` and ``workdir``, which the engine names in
``GraphDriver.Data``) is bind-mounted from a loop-mounted ext4 image. Writing past
its size fails with ``ENOSPC``; everything else about the container is the engine's.

The mounts live in the host's mount table, not in the engine: after a reboot they
are gone, and ``ensure`` (before each start) makes them again, with the layer's
content kept in the image. ``release`` undoes them before the engine removes the
container (whose folder it could not delete while they are there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from runtime.providers.docker.disks import LoopDisks, clone_file, run_tool

MOUNT_DIR = Path("/run/siesta/layers")
LAYER_SUFFIX = ".layer"


class WritableLayers:
    def __init__(self, disks: LoopDisks, mount_dir: Path = MOUNT_DIR) -> None:
        self._disks = disks
        self._mounts = mount_dir

    def name_of(self, sandbox: str) -> str:
        return sandbox + LAYER_SUFFIX

    def create(self, sandbox: str, size_mb: int, layer: Path) -> None:
        self._disks.make_image(self.name_of(sandbox), size_mb)
        self.ensure(sandbox, layer)

    def exists(self, sandbox: str) -> bool:
        return self.image(sandbox).exists()

    def ensure(self, sandbox: str, layer: Path) -> None:
        """The container's layer folder on its own file system (again, after a reboot).

        ``layer`` is overlay2's folder of the container's writable layer: it holds the
        ``diff`` (upperdir) and ``work`` folders, which overlayfs wants on one mount,
        and the engine's notes on the layer (``link``, ``lower``). The first time, all
        of it is copied onto the new file system, which is then bind-mounted over it.
        """
        if layer.is_mount():
            return
        staging = self._mounted(sandbox)
        if not any(staging.iterdir()):
            run_tool("cp", "-a", "--preserve=all", f"{layer}/.", f"{staging}/")
            made = layer.stat()
            os.chown(staging, made.st_uid, made.st_gid)
            staging.chmod(made.st_mode & 0o7777)
        run_tool("mount", "--bind", str(staging), str(layer))

    def mountpoint(self, sandbox: str) -> Path:
        """Where the layer's own file system is mounted (what a snapshot freezes)."""
        return self._mounts / sandbox

    def image(self, sandbox: str) -> Path:
        return self._disks.image(self.name_of(sandbox))

    def adopt(self, sandbox: str, layer: Path, source: Path, *, consume: bool) -> None:
        """The container's layer from a snapshot's clone of another's: ``source`` (a
        layer's disk image) cloned (``consume``: moved) to this sandbox's, mounted, and
        given this container's own notes from the engine (``link``: its layer's short
        name; ``lower``: the layers under it, its own init layer first), overlayfs'
        scratch folder emptied; then bind-mounted over the engine's folder, as
        ``ensure`` does."""
        image = self.image(sandbox)
        if consume:
            source.rename(image)
        else:
            making = image.with_name(f".{image.name}.new")
            clone_file(source, making)
            making.rename(image)
        staging = self._mounted(sandbox)
        for note in ("link", "lower"):
            if (layer / note).exists():
                shutil.copy2(layer / note, staging / note)
        work = staging / "work"
        for leftover in work.iterdir() if work.is_dir() else ():
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        run_tool("mount", "--bind", str(staging), str(layer))

    def _mounted(self, sandbox: str) -> Path:
        """The layer's own file system, mounted at its staging folder (once)."""
        staging = self._mounts / sandbox
        staging.mkdir(parents=True, exist_ok=True)
        if not staging.is_mount():
            # loop: util-linux attaches the image with autoclear, so the device goes
            # away with the last mount of it.
            run_tool("mount", "-o", "loop,discard", str(self.image(sandbox)), str(staging))
        return staging

    def release(self, sandbox: str, layer: Path | None) -> None:
        """Unmount (lazily: a running container may still hold them) so the engine finds
        its own folder again; the image stays unless ``remove`` follows."""
        for target in (layer, self._mounts / sandbox):
            if target is not None and target.is_mount():
                run_tool("umount", "-l", str(target), check=False)
        with contextlib.suppress(OSError):
            (self._mounts / sandbox).rmdir()

    def remove(self, sandbox: str, layer: Path | None) -> None:
        self.release(sandbox, layer)
        with contextlib.suppress(FileNotFoundError):
            self.image(sandbox).unlink()
