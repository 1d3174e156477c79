"""Building the catalog's sandbox images (``siesta-runtime images build``).

Every image is ``FROM debian:bookworm-slim``. When that base is neither present
locally nor pullable (machines without registry access), it is created with
``debootstrap --variant=minbase`` and ``docker import``; then the images are
built as normal, so an unchanged image rebuilds from the layer cache.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import docker
import docker.errors

from runtime.errors import SiestaError
from runtime.images import CatalogImage, ImageCatalog

BASE_IMAGE = "debian:bookworm-slim"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
MANAGED_LABEL = "siesta.managed"

Progress = Callable[[str], None]


class ImageBuildError(SiestaError):
    code = "image_build_failed"


def build_images(
    catalog: ImageCatalog,
    ids: Iterable[str] = (),
    *,
    client: docker.DockerClient | None = None,
    progress: Progress = print,
) -> list[CatalogImage]:
    """Build the named images (all buildable ones when ``ids`` is empty)."""
    wanted = list(ids)
    unknown = [i for i in wanted if catalog.find(i) is None]
    if unknown:
        msg = f"not in the image catalog: {', '.join(unknown)}"
        raise ImageBuildError(msg)
    images = [catalog.find(i) for i in wanted] if wanted else catalog.all()
    buildable = [image for image in images if image is not None and image.build]
    client = client or docker.from_env()
    ensure_base_image(client, progress)
    for image in buildable:
        _build_one(client, catalog.root, image, progress)
    return buildable


def ensure_base_image(
    client: docker.DockerClient, progress: Progress, reference: str = BASE_IMAGE
) -> None:
    """Make the Debian base available: present, pulled, or debootstrapped."""
    try:
        client.images.get(reference)
        progress(f"base {reference}: present")
        return
    except docker.errors.ImageNotFound:
        pass
    progress(f"base {reference}: not present, trying to pull")
    try:
        client.images.pull(reference)
        progress(f"base {reference}: pulled")
        return
    except docker.errors.APIError as exc:
        progress(f"base {reference}: pull failed ({_first_line(str(exc))}); using debootstrap")
    _debootstrap_base(progress, reference)


def _debootstrap_base(progress: Progress, reference: str) -> None:
    if shutil.which("debootstrap") is None:
        msg = (
            "debootstrap is not installed (apt-get install debootstrap) "
            "and the base cannot be pulled"
        )
        raise ImageBuildError(msg)
    with tempfile.TemporaryDirectory(prefix="siesta-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        progress(f"debootstrap --variant=minbase {DEBIAN_SUITE} (about a minute)")
        _run(["debootstrap", "--variant=minbase", DEBIAN_SUITE, str(rootfs), DEBIAN_MIRROR])
        # What bookworm-slim leaves out as well: downloaded packages and lists.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (rootfs / leftover).glob("*"):
                if path.is_file():
                    path.unlink()
        progress(f"docker import as {reference}")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            _run(
                [
                    "docker",
                    "import",
                    "--change",
                    'CMD ["bash"]',
                    "--change",
                    f"LABEL {MANAGED_LABEL}=true siesta.base=debootstrap",
                    "-",
                    reference,
                ],
                stdin=tar.stdout,
            )
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            tar.wait()


def _build_one(
    client: docker.DockerClient, root: Path, image: CatalogImage, progress: Progress
) -> None:
    assert image.build is not None
    # The context is the catalog folder, so images can share sources (siesta-fs/).
    dockerfile = f"{image.build}/Dockerfile"
    progress(f"[{image.id}] building {image.image} from {root / dockerfile}")
    stream = client.api.build(
        path=str(root),
        dockerfile=dockerfile,
        tag=image.image,
        labels={MANAGED_LABEL: "true", "siesta.image-id": image.id},
        rm=True,
        forcerm=True,
        decode=True,
    )
    for chunk in stream:
        if "error" in chunk:
            msg = f"[{image.id}] build failed: {chunk['error'].strip()}"
            raise ImageBuildError(msg)
        text = str(chunk.get("stream", "")).rstrip()
        if text:
            progress(f"[{image.id}] {text}")
    progress(f"[{image.id}] built {image.image}")


def _run(argv: list[str], stdin: IO[bytes] | None = None) -> None:
    result = subprocess.run(argv, stdin=stdin, capture_output=True, check=False)
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace")[-2000:]
        msg = f"{argv[0]} failed with exit code {result.returncode}: {tail}"
        raise ImageBuildError(msg)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def image_summary(client: docker.DockerClient, catalog: ImageCatalog) -> str:
    """JSON list of catalog images and whether each is present locally."""
    rows = []
    for image in catalog.all():
        try:
            client.images.get(image.image)
            present = True
        except docker.errors.ImageNotFound:
            present = False
        rows.append(
            {"id": image.id, "image": image.image, "enabled": image.enabled, "present": present}
        )
    return json.dumps(rows, indent=2)
