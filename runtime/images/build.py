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

from runtime.core.errors import ImageBuildFailed
from runtime.images.catalog import CatalogImage, ImageCatalog

BASE_IMAGE = "debian:bookworm-slim"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# What an image says about itself. Docker copies image labels onto every container
# made from the image, so none of these may ever mean "created by the service":
# ownership is the deployment label the provider sets at creation.
SANDBOX_IMAGE_LABEL = "siesta.sandbox-image"
"""On catalog images: the catalog id the image was built for."""
BASE_ORIGIN_LABEL = "siesta.base-origin"
"""On a base this project created itself (``debootstrap``)."""

Progress = Callable[[str], None]


def build_images(
    catalog: ImageCatalog,
    ids: Iterable[str] = (),
    *,
    client: docker.DockerClient | None = None,
    progress: Progress = print,
    from_scratch: bool = False,
) -> list[CatalogImage]:
    """Build the named images (all buildable ones when ``ids`` is empty).

    ``from_scratch``: first take away the base and the images being built, so the
    build goes the way it goes on a machine that never had them (the base is
    pulled or debootstrapped again, and with a new base no cached layer applies).
    """
    wanted = list(ids)
    unknown = [i for i in wanted if catalog.find(i) is None]
    if unknown:
        msg = f"not in the image catalog: {', '.join(unknown)}"
        raise ImageBuildFailed(msg)
    images = [catalog.find(i) for i in wanted] if wanted else catalog.all()
    buildable = [image for image in images if image is not None and image.build]
    client = client or docker.from_env()
    replaced = []
    if from_scratch:
        replaced = _untag(client, [BASE_IMAGE, *(i.image for i in buildable)], progress)
    ensure_base_image(client, progress)
    for image in buildable:
        _build_one(client, catalog.root, image, progress)
    _remove_unused(client, replaced, progress)
    return buildable


def _untag(client: docker.DockerClient, references: list[str], progress: Progress) -> list[str]:
    """Untag ``references``; returns the ids they named. Containers using them keep
    running (Docker keeps an image that is in use, only without its name)."""
    ids = []
    for reference in references:
        try:
            ids.append(str(client.images.get(reference).id))
            client.images.remove(reference, force=True, noprune=True)
            progress(f"from scratch: removed {reference}")
        except docker.errors.ImageNotFound:
            progress(f"from scratch: {reference} was not present")
    return ids


def _remove_unused(client: docker.DockerClient, image_ids: list[str], progress: Progress) -> None:
    """Delete the replaced images and the untagged images built on them (cached
    layers, build stages), children first; an image a container still uses stays."""
    rows = client.api.images(all=True)
    children: dict[str, list[str]] = {}
    for row in rows:
        children.setdefault(str(row.get("ParentId") or ""), []).append(str(row["Id"]))
    tagged = {
        str(r["Id"]) for r in rows if any(t != "<none>:<none>" for t in r.get("RepoTags") or [])
    }
    doomed: list[str] = []
    stack = list(image_ids)
    while stack:
        image_id = stack.pop()
        if image_id in doomed or image_id in tagged:
            continue
        doomed.append(image_id)
        stack.extend(children.get(image_id, []))
    for image_id in reversed(doomed):  # descendants were found after their ancestors
        try:
            client.images.remove(image_id, noprune=True)
        except docker.errors.ImageNotFound:
            continue
        except docker.errors.APIError as exc:  # in use by a container: it stays
            progress(f"kept the replaced image {image_id[:19]}: {_first_line(str(exc))}")


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
        raise ImageBuildFailed(msg)
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
                    f"LABEL {BASE_ORIGIN_LABEL}=debootstrap",
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
        labels={SANDBOX_IMAGE_LABEL: image.id},
        rm=True,
        forcerm=True,
        decode=True,
    )
    for chunk in stream:
        if "error" in chunk:
            msg = f"[{image.id}] build failed: {chunk['error'].strip()}"
            raise ImageBuildFailed(msg)
        text = str(chunk.get("stream", "")).rstrip()
        if text:
            progress(f"[{image.id}] {text}")
    progress(f"[{image.id}] built {image.image}")


def _run(argv: list[str], stdin: IO[bytes] | None = None) -> None:
    result = subprocess.run(argv, stdin=stdin, capture_output=True, check=False)
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace")[-2000:]
        msg = f"{argv[0]} failed with exit code {result.returncode}: {tail}"
        raise ImageBuildFailed(msg)


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
