"""A Docker engine of a test's own, to restart, kill and "reboot" without touching the
machine's engine (which every other test, and every other developer, is using).

It is the machine's ``dockerd`` with its own data root, exec root, socket and pid
file, user-namespace remapping as setup.sh configures it, a bridge of its own and no
firewall rules (sandboxes have no network here). Not ``--bridge=none``: an engine
started so deletes the host's ``docker0``, the machine engine's default bridge. Its
sandbox images are copied from the machine's engine (``docker save | docker load``).

A reboot is what the host loses when it restarts, done by hand: every container
stops (the engine stops), the loop devices of the sandboxes' disks are detached,
their mounts (the writable layers') are undone and ``/run/siesta`` (a tmpfs after a
real reboot) loses the sandboxes' device links.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import docker

from runtime.providers.docker.disks import LINK_DIR
from runtime.providers.docker.layers import MOUNT_DIR
from tests.helpers import remove_labelled

START_SECONDS = 60


class PrivateEngine:
    def __init__(self, images: list[str]) -> None:
        self.id = uuid.uuid4().hex[:8]
        self.root = Path(f"/var/lib/siesta-test-engine-{self.id}")
        self.exec_root = Path(f"/run/siesta-test-engine-{self.id}")
        self.socket = Path(f"/run/siesta-test-engine-{self.id}.sock")
        self.url = f"unix://{self.socket}"
        self.disk_dir = self.root / "disks"
        """Where the services on this engine keep their sandboxes' disk images."""
        self._images = images
        self.bridge = f"sste{self.id[:6]}"
        """Its default bridge (a name of at most 15 characters), made by ``start``."""
        self._process: subprocess.Popen[bytes] | None = None
        self._log = self.root / "dockerd.log"

    # -- life ------------------------------------------------------------------------

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._make_bridge()
        config = self.root / "daemon.json"
        config.write_text(json.dumps({"userns-remap": "default"}))
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    "dockerd",
                    f"--config-file={config}",
                    f"--data-root={self.root / 'data'}",
                    f"--exec-root={self.exec_root}",
                    f"--pidfile={self.root / 'dockerd.pid'}",
                    f"--host={self.url}",
                    f"--bridge={self.bridge}",
                    "--iptables=false",
                    "--ip6tables=false",
                    "--ip-masq=false",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_SECONDS
        while not self.answers():
            assert self._process.poll() is None, f"dockerd ended; see {self._log}"
            assert time.monotonic() < deadline, f"dockerd did not answer; see {self._log}"
            time.sleep(0.2)

    def load_images(self, source: docker.DockerClient) -> None:
        """The sandbox images, copied from ``source`` (the machine's engine)."""
        for image in self._images:
            with subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE) as saved:
                subprocess.run(
                    ["docker", "-H", self.url, "load", "-q"], stdin=saved.stdout, check=True
                )
            assert saved.returncode == 0

    def answers(self) -> bool:
        done = subprocess.run(["docker", "-H", self.url, "info"], capture_output=True, check=False)
        return done.returncode == 0

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM: the engine stops every container (as at a host shutdown); SIGKILL:
        it dies at once, leaving its containers to the next start."""
        if self._process is None:
            return
        if kill:  # the engine and its containerd; the containers' shims live on
            os.killpg(self._process.pid, signal.SIGKILL)
        else:
            self._process.terminate()
        self._process.wait(timeout=120)
        self._process = None
        # A killed containerd's pid file may name a process not reaped yet: the next
        # engine would take it for a live containerd and wait for it forever.
        with contextlib.suppress(FileNotFoundError):
            (self.exec_root / "containerd" / "containerd.pid").unlink()

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()

    def reboot(self) -> None:
        """The engine stops, then what a reboot takes from the host goes, then it starts."""
        self.stop()
        self._forget_host_state()
        self.start()

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url)

    def remove(self, label: str) -> None:
        """Everything labelled ``label`` on this engine, then the engine and its files."""
        if self._process is not None:
            with contextlib.suppress(docker.errors.DockerException):
                client = self.client()
                remove_labelled(client, label, self.disk_dir)
                client.close()
            self.stop()
        self._forget_host_state()
        for leftover in self._own_mounts():
            subprocess.run(["umount", "-l", leftover], check=False)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, check=False)
        for folder in [self.root, *self.exec_root.parent.glob(f"{self.exec_root.name}*")]:
            if folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
            else:
                folder.unlink(missing_ok=True)

    def _make_bridge(self) -> None:
        shown = subprocess.run(["ip", "link", "show", self.bridge], capture_output=True)
        if shown.returncode == 0:
            return
        subnet = 16 + int(self.id[:2], 16) % 200  # one of 10.16.0.0/24 .. 10.215.0.0/24
        for command in (
            ["ip", "link", "add", self.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"10.{subnet}.0.1/24", "dev", self.bridge],
            ["ip", "link", "set", self.bridge, "up"],
        ):
            subprocess.run(command, check=True, capture_output=True)

    # -- a reboot by hand -------------------------------------------------------------

    def _forget_host_state(self) -> None:
        images = sorted(self.disk_dir.glob("*/*.img")) if self.disk_dir.is_dir() else []
        names = {image.stem for image in images}
        for mount in self._own_mounts():  # writable layers' binds and their images' mounts
            subprocess.run(["umount", "-l", mount], check=False)
        for name in names:
            if not name.endswith(".layer"):
                staging = MOUNT_DIR / name
                if staging.is_mount():
                    subprocess.run(["umount", "-l", str(staging)], check=False)
                with contextlib.suppress(OSError):
                    staging.rmdir()
        for image in images:
            attached = subprocess.run(
                ["losetup", "--associated", str(image), "--noheadings", "-O", "NAME"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            for device in attached:
                subprocess.run(["losetup", "-d", device], check=False)
            with contextlib.suppress(FileNotFoundError):
                (LINK_DIR / image.stem).unlink()

    def _own_mounts(self) -> list[str]:
        """Mount points in this engine's folders (data root, exec roots), deepest first."""
        roots = (str(self.root) + "/", str(self.exec_root))
        points = [
            line.split()[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(roots)
        ]
        return sorted(points, key=len, reverse=True)
