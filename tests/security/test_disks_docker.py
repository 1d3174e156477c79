"""Disk limits and root that is not root, on real sandboxes.

The workspace and the writable layer are each a file system of their own (sparse
ext4 images on loop devices): writing past either is ENOSPC inside, the result
says which limit, the host gives up no more than the limit, deleted space goes
back to the host, everything survives a reboot of the host's mounts, and nothing
is left behind when the conversation goes. Sandboxes run in a user namespace: their
root is an unprivileged uid on the host.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import docker
import pytest

from runtime.providers.docker.disks import LINK_DIR
from runtime.providers.docker.layers import MOUNT_DIR
from tests.helpers import (
    ServiceProcess,
    StartService,
    call,
    disk_image,
    headers,
    new_conversation,
    run_command,
    sandbox_of,
    wait_until,
)

pytestmark = [pytest.mark.docker]

WORKSPACE_MB = 64
CONTAINER_MB = 128


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    return start_service(
        "docker",
        SIESTA_SANDBOX__WORKSPACE_SIZE_MB=str(WORKSPACE_MB),
        SIESTA_SANDBOX__CONTAINER_DISK_MB=str(CONTAINER_MB),
        # Idle sandboxes stop after 3 s: the reboot test needs a stopped one.
        SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS="1",
        SIESTA_LIFECYCLE__STOP_AFTER_SECONDS="3",
        SIESTA_RECONCILE__INTERVAL_SECONDS="1",
    )


def limits(result: dict[str, object]) -> dict[str, object]:
    reached = result["limitsReached"]
    assert isinstance(reached, list)
    return {limit["limit"]: limit["value"] for limit in reached}


def test_the_writable_layer_has_its_own_limit(service: ServiceProcess) -> None:
    conversation = new_conversation()
    result = run_command(
        service.client, conversation, "dd if=/dev/zero of=/var/tmp/fill bs=1M count=500"
    )
    assert "No space left on device" in result["stderr"]
    assert limits(result) == {"container_disk": CONTAINER_MB}
    # The workspace is another file system: still all there.
    after = run_command(service.client, conversation, "dd if=/dev/zero of=w bs=1M count=20")
    assert after["exitCode"] == 0, after["stderr"]


def test_an_empty_workspace_is_empty_and_sized(service: ServiceProcess) -> None:
    conversation = new_conversation()
    listing = call(service.client, conversation, "listFiles", {"path": "."})
    assert listing["entries"] == []  # no lost+found
    size = run_command(service.client, conversation, "df -B1M --output=size /mnt/work | tail -1")
    assert 0.8 * WORKSPACE_MB <= int(size["stdout"]) <= WORKSPACE_MB  # less the ext4 overhead


def test_a_new_sandbox_takes_blank_disks_made_ahead(service: ServiceProcess) -> None:
    first = new_conversation()
    run_command(service.client, first, "true")
    spares = disk_image(sandbox_of(service, first)).parent / "spares"

    def stock() -> dict[int, set[int]]:
        """Spare images per size (MB), by inode."""
        found: dict[int, set[int]] = {}
        for folder in spares.iterdir() if spares.is_dir() else []:
            inodes = found.setdefault(int(folder.name.split("-")[0]), set())
            for image in folder.glob("*.img"):
                with contextlib.suppress(FileNotFoundError):  # taken meanwhile
                    inodes.add(image.stat().st_ino)
        return found

    def full() -> bool:
        return {size: len(images) for size, images in stock().items()} == {
            WORKSPACE_MB: 4,
            CONTAINER_MB: 4,
        }

    assert wait_until(full, timeout=30)
    before = stock()
    conversation = new_conversation()
    run_command(service.client, conversation, "true")
    sandbox = sandbox_of(service, conversation)

    # Both of its disks are spares that were waiting: no file system made on its path.
    assert disk_image(sandbox).stat().st_ino in before[WORKSPACE_MB]
    assert disk_image(f"{sandbox}.layer").stat().st_ino in before[CONTAINER_MB]
    assert wait_until(full, timeout=30)  # and the stock is made up again


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_deleted_space_goes_back_to_the_host(service: ServiceProcess) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "dd if=/dev/urandom of=big bs=1M count=40; sync")
    image = disk_image(sandbox_of(service, conversation))
    full = _allocated(image)
    assert full >= 40 * 1024 * 1024
    run_command(service.client, conversation, "rm big; sync")
    assert wait_until(lambda: _allocated(image) < full - 30 * 1024 * 1024, timeout=10)


def test_root_inside_is_not_root_outside(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    inside = run_command(
        service.client,
        conversation,
        "id -u; useradd bob && touch f && chown bob f && stat -c %U f; su bob -c 'id -un'",
    )
    assert inside["stdout"] == "0\nbob\nbob\n", inside["stderr"]
    pid = docker_client.api.inspect_container(sandbox_of(service, conversation))["State"]["Pid"]
    status = Path(f"/proc/{pid}/status").read_text()
    host_uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
    assert host_uid >= 100000  # the remapped root, not the host's
    # Files made inside belong, on the host, to the remapped uids (bob: 1000 inside).
    volume = docker_client.api.inspect_volume(sandbox_of(service, conversation))
    assert os.stat(Path(volume["Mountpoint"]) / "f").st_uid == host_uid + 1000


def test_disks_survive_a_reboot_of_the_hosts_mounts(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "echo kept > w; echo pkg > /usr/local/marker")
    sandbox = sandbox_of(service, conversation)

    def status() -> str:
        return str(docker_client.api.inspect_container(sandbox)["State"]["Status"])

    assert wait_until(lambda: status() == "exited", timeout=30)  # stopped for idleness
    # What a reboot takes away: the layer's mounts, the loop device, its link in /run.
    layer = Path(docker_client.api.inspect_container(sandbox)["GraphDriver"]["Data"]["UpperDir"])
    for target in (layer.parent, MOUNT_DIR / sandbox):
        subprocess.run(["umount", "-l", str(target)], check=True)
    device = os.readlink(LINK_DIR / sandbox)
    (LINK_DIR / sandbox).unlink()
    subprocess.run(["losetup", "-d", device], check=True)
    time.sleep(0.5)

    result = run_command(service.client, conversation, "cat w /usr/local/marker")
    assert result["stdout"] == "kept\npkg\n", result["stderr"]
    assert result["workspaceReset"] is False


def test_nothing_is_left_when_the_conversation_goes(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "echo x > /var/tmp/y")
    sandbox = sandbox_of(service, conversation)
    workspace = disk_image(sandbox)
    images = [workspace, workspace.with_name(f"{sandbox}.layer.img")]
    assert all(image.exists() for image in images)
    deleted = service.client.delete(f"/v1/conversations/{conversation}", headers=headers())
    assert deleted.status_code == 200, deleted.text
    assert not any(image.exists() for image in images)
    assert not (LINK_DIR / sandbox).exists() and not (MOUNT_DIR / sandbox).exists()
    attached = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert sandbox not in attached
    assert sandbox not in Path("/proc/self/mountinfo").read_text()
