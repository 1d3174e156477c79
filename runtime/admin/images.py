"""Changing the image catalog while the service runs (``/v1/admin/images``, the console).

The catalog lives in the store (``CatalogStore``): every change is there at once for
every instance, which reads it at each call (``ImageCatalog.live``). Each image
version (``id:tag``) is changed by compare-and-set, so two operators (or a build that
finishes while someone retires the image) never undo each other's change.

Builds run on a thread of the instance that was asked, one at a time per version
across instances (a lease on the version), with their log appended to the store as
they go, so any instance can stream it. A build changes only the version's digest:
sandboxes already made keep the image they started with (the engine keeps an image
while a container uses it); new sandboxes, and the warm pool's new members, get the
new build (``CatalogImage.key``: the pool discards the previous build's members).

Every change is recorded in the audit trail here, whichever surface asked.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runtime.admin.audit import AuditLog
from runtime.admin.builder import ImageBuilder
from runtime.core.errors import (
    CatalogImageExists,
    CatalogImageNotFound,
    CatalogImageStateConflict,
    ImageBuildRunning,
    SiestaError,
)
from runtime.core.operator_records import ImageBuild
from runtime.core.records import SessionRecord
from runtime.images.build_log import LAST_LINE_BYTES, BuildLog, cut
from runtime.images.catalog import (
    CatalogContents,
    CatalogImage,
    ImageCatalog,
    ImageState,
    read_catalog_file,
)
from runtime.images.inline import check_new_version
from runtime.images.settings import ImageSettings
from runtime.seams.stores import CatalogStore, LeaseStore, SessionStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Actor:
    """Who asks for a change, for the audit trail."""

    name: str
    source: str
    via: str
    """``api`` or ``console``."""


@dataclass(frozen=True)
class ImportResult:
    added: list[str]
    updated: list[str]


class CatalogAdmin:
    def __init__(
        self,
        store: CatalogStore,
        sessions: SessionStore,
        leases: LeaseStore,
        audit: AuditLog,
        settings: ImageSettings,
        builder: ImageBuilder | None,
        clock: Callable[[], float] = time.time,
        secrets: Sequence[str] = (),
    ) -> None:
        """``secrets``: the deployment's secret values, masked in every build's log."""
        self._store = store
        self._sessions = sessions
        self._leases = leases
        self._audit = audit
        self._settings = settings
        self._builder = builder
        self._clock = clock
        self._secrets = tuple(secrets)
        self.root = settings.catalog_path.parent
        self._order = self._file_order()
        self.catalog = ImageCatalog.live(self.contents, self.root)

    # -- reading -----------------------------------------------------------------------

    def contents(self) -> CatalogContents:
        """The catalog as the store holds it now, in (id, tag) order."""
        bodies, defaults = self._store.catalog()
        images = [CatalogImage.model_validate_json(body) for body in bodies.values()]
        order = self._order
        images.sort(key=lambda i: (order.get(i.id, len(order)), i.id, i.tag))
        return CatalogContents(images, defaults)

    def get(self, ref: str) -> CatalogImage:
        image = self.catalog.find(ref)
        if image is None:
            msg = f"the image catalog has no version {ref!r}"
            raise CatalogImageNotFound(msg, ref=ref)
        return image

    def sessions_on(self, image: CatalogImage) -> list[SessionRecord]:
        """The sessions that run this version (their records name it)."""
        return self._sessions_by_version().get(image.ref, [])

    def usage(self) -> dict[str, int]:
        """How many sessions run each version (by ``id:tag``)."""
        return {ref: len(records) for ref, records in self._sessions_by_version().items()}

    def _sessions_by_version(self) -> dict[str, list[SessionRecord]]:
        """Every session record under the version it names, the catalog read once (a
        record written before versions names a bare id: its default version)."""
        contents = self.contents()
        fixed = ImageCatalog.live(lambda: contents, self.root)
        found: dict[str, list[SessionRecord]] = {}
        for record in self._sessions.list_sessions():
            image = fixed.find(record.image_id)
            if image is not None:
                found.setdefault(image.ref, []).append(record)
        return found

    def builds(self, image: CatalogImage, limit: int = 20) -> list[ImageBuild]:
        return self._store.list_builds(image.ref, limit)

    def build(self, build_id: str) -> ImageBuild:
        found = self._store.get_build(build_id)
        if found is None:
            msg = f"no image build {build_id!r}"
            raise CatalogImageNotFound(msg, buildId=build_id)
        return found

    def build_log(self, build_id: str, start: int = 0) -> list[str]:
        return self._store.build_log(build_id, start)

    # -- the YAML file -------------------------------------------------------------------

    def seed(self) -> list[str]:
        """Add the file's versions the store lacks (an operator's later change to a
        version stays: only ``reimport`` overwrites). Returns the refs added."""
        file = read_catalog_file(self._settings.catalog_path)
        added = []
        for image in file.images:
            if self._store.add_image(image.ref, self._with_digest(image).model_dump_json()):
                added.append(image.ref)
        for image_id, tag in file.defaults.items():
            self._store.set_default_tag(image_id, tag, only_if_unset=True)
        return added

    def reimport(self, actor: Actor) -> ImportResult:
        """The file again: its versions' definitions replace the store's (a retired
        version stays retired; digests and build times stay), new ones are added, and
        its default tags apply. Versions only the store has are left alone."""
        file = read_catalog_file(self._settings.catalog_path)
        added, updated = [], []
        for image in file.images:
            if self._store.add_image(image.ref, self._with_digest(image).model_dump_json()):
                added.append(image.ref)
                continue

            def redefine(old: CatalogImage, new: CatalogImage = image) -> CatalogImage:
                return new.model_copy(
                    update={
                        "retired": old.retired,
                        "enabled": new.enabled and not old.retired,
                        "digest": old.digest,
                        "built_at": old.built_at,
                    }
                )

            self._change(image.ref, redefine, actor)
            updated.append(image.ref)
        for image_id, tag in file.defaults.items():
            self._store.set_default_tag(image_id, tag)
        self._audit.record(
            actor.name,
            "image.import",
            str(self._settings.catalog_path),
            source=actor.source,
            via=actor.via,
            details={"added": added, "updated": updated},
        )
        return ImportResult(added, updated)

    def refresh_digests(self, refs: list[str]) -> list[str]:
        """Read these versions' digests from the engine again (after ``siesta-runtime
        images build`` rebuilt them outside the service); returns the refs changed."""
        changed = []
        for ref in refs:
            image = self.catalog.find(ref)
            found = self._builder.digest_of(image.image) if self._builder and image else None
            if image is None or found is None or found[0] == image.digest:
                continue

            def built(old: CatalogImage, found: tuple[str, float] = found) -> CatalogImage:
                return old.model_copy(update={"digest": found[0], "built_at": found[1]})

            self._change(image.ref, built, Actor("cli", "local", "cli"))
            changed.append(image.ref)
        return changed

    def _with_digest(self, image: CatalogImage) -> CatalogImage:
        found = self._builder.digest_of(image.image) if self._builder else None
        if found is None:
            return image
        return image.model_copy(update={"digest": found[0], "built_at": found[1]})

    def _file_order(self) -> dict[str, int]:
        """Ids in the YAML file's order (the shipped images first, as they were listed)."""
        try:
            file = read_catalog_file(self._settings.catalog_path)
        except SiestaError:
            return {}
        order: dict[str, int] = {}
        for image in file.images:
            order.setdefault(image.id, len(order))
        return order

    # -- changes -----------------------------------------------------------------------

    def add(self, image: CatalogImage, *, default: bool, actor: Actor) -> CatalogImage:
        """A new version, disabled until an operator enables it (build it first)."""
        check_new_version(image)
        stamped = image.model_copy(
            update={"updated_at": self._clock(), "updated_by": actor.name, "retired": False}
        )
        if not self._store.add_image(image.ref, stamped.model_dump_json()):
            msg = f"the image catalog has {image.ref} already"
            raise CatalogImageExists(msg, ref=image.ref)
        self._store.set_default_tag(image.id, image.tag, only_if_unset=not default)
        self._audit.record(
            actor.name,
            "image.add",
            image.ref,
            source=actor.source,
            via=actor.via,
            details={"image": image.image, "default": default, "enabled": image.enabled},
        )
        return stamped

    def set_state(self, ref: str, state: ImageState, actor: Actor) -> CatalogImage:
        def apply(old: CatalogImage) -> CatalogImage:
            if old.retired and state is not ImageState.RETIRED:
                msg = f"{old.ref} is retired: it cannot be {state.value} again (add a new tag)"
                raise CatalogImageStateConflict(msg, ref=old.ref, state=old.state.value)
            return old.model_copy(
                update={
                    "enabled": state is ImageState.ENABLED,
                    "retired": state is ImageState.RETIRED,
                }
            )

        changed = self._change(ref, apply, actor)
        verb = {ImageState.ENABLED: "enable", ImageState.DISABLED: "disable"}
        self._audit.record(
            actor.name,
            f"image.{verb.get(state, 'retire')}",
            changed.ref,
            source=actor.source,
            via=actor.via,
            details={"sessions": len(self.sessions_on(changed))},
        )
        return changed

    def set_default(self, ref: str, actor: Actor) -> CatalogImage:
        image = self.get(ref)
        if image.retired:
            msg = f"{image.ref} is retired: it cannot be the default tag of {image.id}"
            raise CatalogImageStateConflict(msg, ref=image.ref, state=image.state.value)
        self._store.set_default_tag(image.id, image.tag)
        self._audit.record(
            actor.name, "image.default", image.ref, source=actor.source, via=actor.via
        )
        return image

    def _change(
        self, ref: str, apply: Callable[[CatalogImage], CatalogImage], actor: Actor
    ) -> CatalogImage:
        """Compare-and-set until it holds: ``apply`` sees the version as stored now."""
        while True:
            bodies, _ = self._store.catalog()
            image = self.get(ref)
            body = bodies[image.ref]
            changed = apply(CatalogImage.model_validate_json(body)).model_copy(
                update={"updated_at": self._clock(), "updated_by": actor.name}
            )
            if self._store.replace_image(image.ref, body, changed.model_dump_json()):
                return changed

    # -- builds ------------------------------------------------------------------------

    def start_build(self, ref: str, actor: Actor, *, no_cache: bool = False) -> ImageBuild:
        """Build the version on a thread of this instance; the record says how it goes.
        ``no_cache``: run every step again (to take in what changed upstream)."""
        image = self.get(ref)
        if image.retired:
            msg = f"{image.ref} is retired: it is not built again (add a new tag)"
            raise CatalogImageStateConflict(msg, ref=image.ref, state=image.state.value)
        if not image.buildable:
            msg = f"{image.ref} has no build context nor Dockerfile to build from"
            raise CatalogImageStateConflict(msg, ref=image.ref, state=image.state.value)
        build_id = uuid.uuid4().hex
        lease_key = f"image-build:{image.ref}"
        ttl = self._settings.build_timeout_seconds
        if self._leases.acquire_lease(lease_key, build_id, ttl) is None:
            running = next(
                (b for b in self._store.list_builds(image.ref, 5) if b.state == "running"), None
            )
            msg = f"{image.ref} is being built already"
            raise ImageBuildRunning(
                msg, ref=image.ref, buildId=running.build_id if running else None
            )
        build = ImageBuild(build_id, image.ref, "running", actor.name, self._clock())
        self._store.put_build(build)
        self._audit.record(
            actor.name,
            "image.build",
            image.ref,
            source=actor.source,
            via=actor.via,
            details={"buildId": build_id, "noCache": no_cache},
        )
        threading.Thread(
            target=self._run_build,
            args=(image, build, lease_key, no_cache),
            name=f"image-build-{image.ref}",
            daemon=True,
        ).start()
        return build

    def _run_build(
        self, image: CatalogImage, build: ImageBuild, lease_key: str, no_cache: bool
    ) -> None:
        keep = self._settings.build_log_lines
        output = BuildLog(
            lambda line: self._store.append_build_log(build.build_id, [line], keep),
            self._settings.build_log_bytes,
            self._secrets,
        )

        try:
            if self._builder is None:
                msg = (
                    "this deployment's provider builds no images: build and push them "
                    "with your registry's tooling, then add or re-import them"
                )
                raise CatalogImageStateConflict(msg)
            digest = self._builder.build(image, self.root, output.line, no_cache=no_cache)
        except Exception as exc:  # the build's failure is its record's, not the thread's
            error = exc.message if isinstance(exc, SiestaError) else f"{type(exc).__name__}: {exc}"
            error = cut(output.masked(error), LAST_LINE_BYTES)
            log.warning("image build %s of %s failed: %s", build.build_id, image.ref, error)
            output.last(f"build failed: {error}")
            self._finish(build, "failed", error=error)
        else:
            now = self._clock()

            def built(old: CatalogImage) -> CatalogImage:
                # The build wrote its version's own name: an entry of the catalog file
                # that named another (to run) now runs what was built.
                update = {"digest": digest, "built_at": now, "image": image.built_as}
                return old.model_copy(update=update)

            with contextlib.suppress(CatalogImageNotFound):
                self._change(image.ref, built, Actor(build.requested_by, "", "build"))
            self._finish(build, "succeeded", digest=digest)
        finally:
            self._leases.release_lease(lease_key, build.build_id)

    def _finish(
        self, build: ImageBuild, state: str, *, digest: str | None = None, error: str | None = None
    ) -> None:
        done = ImageBuild(
            build.build_id,
            build.ref,
            state,
            build.requested_by,
            build.started_at,
            self._clock(),
            digest,
            error,
        )
        self._store.put_build(done)
