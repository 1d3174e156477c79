"""The ``base`` catalog image (images/base/): the stock E2B SDK's default template,
i.e. the python image plus sudo and a user ``user`` with passwordless sudo."""

from __future__ import annotations

import docker
import pytest

from tests.helpers import REPO, TEST_RUN_ID, TEST_RUN_LABEL

IMAGES = REPO / "images"


def instructions(text: str) -> list[str]:
    """A Dockerfile's lines without comments: what the layer cache compares."""
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_base_repeats_the_python_image_and_only_adds_to_it() -> None:
    # Byte-identical instructions up to python's ENTRYPOINT, so `images build` reuses
    # all of python's layers and base costs one more RUN (make test builds both).
    python = instructions((IMAGES / "python" / "Dockerfile").read_text())
    base = instructions((IMAGES / "base" / "Dockerfile").read_text())
    assert base[: len(python)] == python
    added = [line for line in base[len(python) :] if line.strip()]
    assert added[0].startswith("RUN ")
    assert not any(
        line.startswith(("FROM", "WORKDIR", "ENTRYPOINT", "CMD", "USER")) for line in added
    )


CHECKS = r"""
set -e
id user
getent passwd user
stat -c '%a %U:%G' /etc/sudoers.d/user /home/user
setpriv --reuid=1000 --regid=1000 --init-groups sudo -n -u root id -u
setpriv --reuid=1000 --regid=1000 --init-groups env HOME=/home/user USER=user LOGNAME=user \
  bash -l -c 'cd ~ && touch x && stat -c "%U:%G" x'
python3 -c 'import ensurepip, venv' && pip3 --version >/dev/null && echo python ok
"""


@pytest.mark.docker
def test_base_has_user_with_passwordless_sudo(docker_client: docker.DockerClient) -> None:
    output = docker_client.containers.run(
        "siesta/base:1",
        ["-c", CHECKS],
        entrypoint="/bin/bash",
        remove=True,
        network_mode="none",
        labels={TEST_RUN_LABEL: TEST_RUN_ID},
    )
    assert output.decode().splitlines() == [
        "uid=1000(user) gid=1000(user) groups=1000(user),27(sudo)",
        "user:x:1000:1000::/home/user:/bin/bash",
        "440 root:root",
        "755 user:user",
        "0",
        "user:user",
        "python ok",
    ]
