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
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import docker
import docker.errors
import requests.exceptions

from runtime.core.errors import ImageBuildFailed
from runtime.images.build_network import BuildNetwork
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.images.inline import INLINE_DOCKERFILE, check_inline_dockerfile, inline_context

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
    buildable = [image for image in images if image is not None and image.buildable]
    client = client or docker.from_env()
    replaced = []
    if from_scratch:
        replaced = _untag(client, [BASE_IMAGE, *(i.image for i in buildable)], progress)
    ensure_base_image(client, progress)
    for image in buildable:
        build_image(client, catalog.root, image, progress)
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
            if exc.status_code == 409:
                progress(f"the replaced image {image_id[:19]} stays: a container still uses it")
            else:
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


def build_image(
    client: docker.DockerClient,
    root: Path,
    image: CatalogImage,
    progress: Progress,
    *,
    no_cache: bool = False,
    tag: str | None = None,
    network: BuildNetwork | None = None,
) -> str:
    """Build one catalog version (its ``build`` folder's Dockerfile, with the catalog
    folder as the context, or its inline ``dockerfile``, with the shared sources alone:
    ``runtime.images.inline``) and tag it ``tag`` (default: the version's ``image``).
    ``network``: where its steps may reach (default: the engine's, for the command line).
    Returns the new image's id (its digest)."""
    tag = tag or image.image
    common: dict[str, Any] = {
        "tag": tag,
        "labels": {SANDBOX_IMAGE_LABEL: image.ref},
        "rm": True,
        "forcerm": True,
        "nocache": no_cache,
        "decode": True,
    }
    hidden: list[str] = []
    if network is not None:
        args = network.build_args(image.ref)
        urls = {value for value in args.values() if "@" in value}  # not NO_PROXY's names
        passwords = {urlsplit(url).password or "" for url in urls}
        hidden = sorted({*urls, *passwords} - {""}, key=len, reverse=True)
        common |= {"network_mode": network.mode, "buildargs": args}
    if image.dockerfile is not None:
        check_inline_dockerfile(image.dockerfile)
        progress(f"[{image.ref}] building {tag} from its inline Dockerfile")
        stream = client.api.build(
            fileobj=inline_context(root, image.dockerfile),
            custom_context=True,
            dockerfile=INLINE_DOCKERFILE,
            **common,
        )
    elif image.build is not None:
        dockerfile = f"{image.build}/Dockerfile"
        progress(f"[{image.ref}] building {tag} from {root / dockerfile}")
        stream = client.api.build(path=str(root), dockerfile=dockerfile, **common)
    else:
        msg = f"{image.ref} has no build context nor Dockerfile: it cannot be built here"
        raise ImageBuildFailed(msg)
    for chunk in stream:
        if "error" in chunk:
            msg = f"[{image.ref}] build failed: {_masked(chunk['error'].strip(), hidden)}"
            raise ImageBuildFailed(msg)
        text = _masked(str(chunk.get("stream", "")).rstrip(), hidden)
        if text:
            progress(f"[{image.ref}] {text}")
    digest = str(client.images.get(tag).id)
    progress(f"[{image.ref}] built {tag} ({digest[:19]})")
    return digest


def _masked(text: str, hidden: list[str]) -> str:
    """The build's proxy credentials never reach its log (``RUN env`` would show them)."""
    for value in hidden:
        text = text.replace(value, "•" * 6)
    return text


def remove_replaced(client: docker.DockerClient, image_id: str, progress: Progress) -> None:
    """Delete a build a rebuild replaced, with the layers only it used; a container
    still on it keeps it (its sandbox keeps the image it started with)."""
    _remove_unused(client, [image_id], progress)


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


class DockerImageBuilder:
    """Builds catalog versions in the Docker engine the sandboxes run on, confined: each
    writes only its version's ``siesta-catalog/<id>:<tag>`` (never an image the
    deployment runs, nor another version's), and its steps reach only what ``network``
    allows (default: nothing)."""

    def __init__(
        self,
        client: Callable[[], docker.DockerClient] = docker.from_env,
        network: BuildNetwork | None = None,
    ) -> None:
        self._make_client = client
        self._client: docker.DockerClient | None = None
        self._network = network or BuildNetwork()

    def _connect(self) -> docker.DockerClient:
        if self._client is None:  # at first use: a service that never builds never connects
            self._client = self._make_client()
        return self._client

    def build(
        self, image: CatalogImage, root: Path, progress: Progress, *, no_cache: bool = False
    ) -> str:
        client = self._connect()
        ensure_base_image(client, progress)
        target = image.built_as
        previous = self.digest_of(target)  # only ever one of ours is replaced, and removed
        digest = build_image(
            client, root, image, progress, no_cache=no_cache, tag=target, network=self._network
        )
        if previous is not None and previous[0] != digest:
            remove_replaced(client, previous[0], progress)
        return digest

    def digest_of(self, reference: str) -> tuple[str, float] | None:
        """``None`` too when the engine cannot be reached: a digest is something to show
        and to key the pool by, never a reason for a command (``reconcile``) to fail
        before it can say what is wrong with the engine."""
        try:
            found = self._connect().images.get(reference)
        except docker.errors.ImageNotFound:
            return None
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            self._client = None  # the next call connects again
            return None
        return str(found.id), _created_at(str(found.attrs.get("Created", "")))


def _created_at(text: str) -> float:
    """Docker's ``Created`` (RFC 3339 with nanoseconds) as epoch seconds; 0 if unreadable."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    try:
        moment = datetime.fromisoformat(whole).replace(tzinfo=UTC)
    except ValueError:
        return 0.0
    return moment.timestamp() + float(f"0.{fraction[:6] or 0}")
