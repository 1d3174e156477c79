"""Workspaces of a fixed size: one ext4 file system per sandbox, in an image file.

The host's file systems here (ext4, overlay2) offer no per-directory quota, so a
sandbox's workspace is its own file system: a sparse image file, formatted ext4,
attached as a loop device, and mounted by Docker's local volume driver. Writing
past its size fails with ``ENOSPC`` inside the sandbox; the host and every other
sandbox are untouched. Creating one takes about 10 ms; it occupies on the host
only what was written (``discard`` hands deleted blocks back).

The volume names its device through a symlink under ``/run`` (a tmpfs): after a
reboot the loop devices are gone, and so is the link, so the mount fails safely
instead of mounting whatever image took that loop number since; ``attach``
(before every start) makes device and link again.

Needs root (``losetup``, ``mkfs.ext4``, ``debugfs``), as the Docker engine does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from runtime.core.errors import ConfigurationError, ProvisioningFailed

log = logging.getLogger(__name__)
LINK_DIR = Path("/run/siesta/disks")
DEFAULT_DISK_ROOT = Path("/var/lib/siesta/disks")
"""Images live in ``<this>/<deployment id>`` (``SIESTA_SANDBOX__DISK_DIR``): on the
engine's host, where every instance of the deployment finds them."""
SPARES = "spares"
"""Blank images made ahead live in ``<disk dir>/spares/<size>-<uid>-<gid>/``."""
MOUNT_OPTIONS = "nosuid,nodev,discard"
"""nosuid/nodev: nothing on a workspace grants privileges; discard: deleted files
give their space back to the host."""


class LoopDisks:
    def __init__(
        self, directory: Path, *, owner: tuple[int, int] = (0, 0), link_dir: Path = LINK_DIR
    ) -> None:
        self._directory = directory.resolve()
        self._links = link_dir
        self.owner = owner
        """Owner of the file system's root: root inside the sandbox, as the host sees it."""

    def check(self) -> None:
        """Refuse to start where disks cannot be made (not root, no tools)."""
        missing = [tool for tool in ("losetup", "mkfs.ext4", "debugfs") if _tool(tool) is None]
        if missing or os.geteuid() != 0:
            why = f"{', '.join(missing)} missing" if missing else "the service is not root"
            msg = (
                f"fixed-size workspaces need root, losetup and e2fsprogs ({why}); "
                "set SIESTA_SANDBOX__WORKSPACE_SIZE_MB=0 to run without a workspace limit"
            )
            raise ConfigurationError(msg)

    @property
    def directory(self) -> Path:
        return self._directory

    def image(self, name: str) -> Path:
        return self._directory / f"{name}.img"

    def link(self, name: str) -> Path:
        return self._links / name

    def create(self, name: str, size_mb: int) -> str:
        """A new, empty file system; returns the device path the volume mounts."""
        self.make_image(name, size_mb)
        return self.attach(name)

    def make_image(self, name: str, size_mb: int) -> None:
        """The image file with an empty ext4 file system in it (not attached): a spare
        made ahead when one of the size waits (a rename), otherwise made now."""
        image = self.image(name)
        self._directory.mkdir(parents=True, exist_ok=True)
        if not self._take_spare(size_mb, image):
            self._format(image, size_mb)

    # -- spares: blank images made ahead ---------------------------------------------

    def stock_spares(self, size_mb: int, count: int) -> int:
        """Make blank images of ``size_mb`` until ``count`` wait; returns how many were
        made. Every instance of a deployment may stock the same folder: a spare is
        taken by a rename, which only one taker wins."""
        folder = self._spares(size_mb)
        folder.mkdir(parents=True, exist_ok=True)
        made = 0
        while len(list(folder.glob("*.img"))) < count:
            spare = folder / f"{uuid.uuid4().hex}.img"
            making = spare.with_name(f".{spare.name}.new")  # never taken half made
            try:
                self._format(making, size_mb)
                making.rename(spare)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    making.unlink()
            made += 1
        return made

    def remove_spares(self) -> None:
        shutil.rmtree(self._directory / SPARES, ignore_errors=True)

    def _spares(self, size_mb: int) -> Path:
        # The owner is part of the name: images formatted for another root (the engine's
        # user-namespace remapping changed) are never taken.
        uid, gid = self.owner
        return self._directory / SPARES / f"{size_mb}-{uid}-{gid}"

    def _take_spare(self, size_mb: int, image: Path) -> bool:
        folder = self._spares(size_mb)
        if not folder.is_dir():
            return False
        for spare in folder.glob("*.img"):
            try:
                spare.rename(image)
            except FileNotFoundError:
                continue  # another sandbox took this one
            return True
        return False

    def _format(self, image: Path, size_mb: int) -> None:
        with image.open("wb") as file:
            file.truncate(size_mb * 1024 * 1024)  # sparse: blocks come as they are written
        uid, gid = self.owner
        _run(
            "mkfs.ext4",
            "-q",
            "-F",
            "-m",
            "0",  # no blocks reserved for root: the sandbox's root is the only user
            "-E",
            f"lazy_itable_init=1,lazy_journal_init=1,root_owner={uid}:{gid}",
            str(image),
        )
        # An empty workspace, as a plain volume's: no lost+found for listFiles to show.
        _run("debugfs", "-w", "-R", "rmdir lost+found", str(image))

    def attach(self, name: str) -> str:
        """The device link, attaching the image first when needed (after a reboot)."""
        link = self.link(name)
        device = _attached_device(self.image(name))
        if device is None:
            if not self.image(name).exists():
                msg = f"the workspace image of {name} is missing ({self.image(name)})"
                raise ProvisioningFailed(msg)
            device = _run("losetup", "--find", "--show", str(self.image(name))).strip()
        if not link.is_symlink() or os.readlink(link) != device:
            self._links.mkdir(parents=True, exist_ok=True)
            temporary = link.with_name(f".{name}.new")
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            temporary.symlink_to(device)
            temporary.replace(link)  # atomic: a mount never sees no link or a half one
        return str(link)

    def remove(self, name: str) -> None:
        """Detach, unlink, delete; whatever of it exists."""
        image = self.image(name)
        device = _attached_device(image)
        if device is not None:
            _run("losetup", "-d", device, check=False)
        with contextlib.suppress(FileNotFoundError):
            self.link(name).unlink()
        with contextlib.suppress(FileNotFoundError):
            image.unlink()

    def images(self, *, every: bool = False) -> dict[str, float]:
        """Workspace images here, with the Unix time each was made (``every``: the
        sandboxes' other disks too, their writable layers)."""
        if not self._directory.is_dir():
            return {}
        return {
            path.stem: path.stat().st_ctime
            for path in self._directory.glob("*.img")
            if every or "." not in path.stem
        }


def clone_file(source: Path, target: Path) -> None:
    """``source`` copied to ``target``: a clone sharing its blocks (a reflink: O(its
    extents), whatever its size) where the file system can, else a sparse byte copy."""
    run_tool("cp", "--sparse=always", "--reflink=auto", str(source), str(target))


def clones_by_reference(directory: Path) -> bool:
    """Whether files in ``directory`` can be cloned by reference (XFS with reflink=1,
    btrfs): a probe file cloned with ``cp --reflink=always``."""
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".reflink-probe-{uuid.uuid4().hex}"
    clone = probe.with_name(probe.name + ".clone")
    try:
        probe.write_bytes(b"\0" * 4096)
        result = subprocess.run(
            ["cp", "--reflink=always", str(probe), str(clone)], capture_output=True, check=False
        )
        return result.returncode == 0
    finally:
        for path in (probe, clone):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _attached_device(image: Path) -> str | None:
    output = _run("losetup", "--associated", str(image), "--noheadings", "-O", "NAME", check=False)
    devices = [line.strip() for line in (output or "").splitlines() if line.strip()]
    return devices[0] if devices else None


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def run_tool(tool: str, *args: str, check: bool = True) -> str:
    """The tool's output; a failure raises ``ProvisioningFailed`` unless ``check`` is off."""
    return _run(tool, *args, check=check)


def _run(tool: str, *args: str, check: bool = True) -> str:
    path = _tool(tool)
    if path is None:
        msg = f"{tool} is not installed"
        raise ConfigurationError(msg)
    done = subprocess.run([path, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0 and check:
        msg = f"{tool} {' '.join(args)} failed: {done.stderr.strip()}"
        raise ProvisioningFailed(msg)
    return done.stdout if done.returncode == 0 else ""
