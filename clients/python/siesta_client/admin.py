"""The operators' side, for both clients (``client.admin``; a token with the ``admin``
scope): the live image catalog (add, build, enable, disable, retire, default tag,
re-import) and the audit trail."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from siesta_contract.admin import (
    AuditPage,
    CatalogImageDetail,
    CatalogImagePublic,
    CatalogImagesPublic,
    CatalogImportPublic,
    ImageBuildPublic,
    ImageState,
    NewCatalogImage,
    NewCatalogImageAnswer,
)

from siesta_client import _admin_calls as calls
from siesta_client._ops import AsyncCaller, Caller

POLL_SECONDS = 0.5


class BuildTimeout(TimeoutError):
    """``wait_for_build`` gave up; the build goes on in the service."""


class Admin:
    def __init__(self, client: Caller) -> None:
        self.client = client

    def images(self) -> CatalogImagesPublic:
        """Every version, whatever its state, with how many sessions run it."""
        return self.client.call(calls.catalog_images())

    def image(self, ref: str) -> CatalogImageDetail:
        """One version (``id:tag``, or ``id`` for its default), who runs it, its builds."""
        return self.client.call(calls.catalog_image(ref))

    def add_image(self, image: NewCatalogImage | dict[str, Any]) -> NewCatalogImageAnswer:
        """A new version, disabled until enabled; its build starts at once."""
        return self.client.call(calls.add_catalog_image(image))

    def set_state(self, ref: str, state: ImageState) -> CatalogImagePublic:
        """``enabled``, ``disabled`` or ``retired`` (for good)."""
        return self.client.call(calls.set_image_state(ref, state))

    def make_default(self, ref: str) -> CatalogImagePublic:
        return self.client.call(calls.make_default_image(ref))

    def build(self, ref: str, *, no_cache: bool = False) -> ImageBuildPublic:
        """Start building (or rebuilding) the version; see ``wait_for_build``."""
        return self.client.call(calls.build_catalog_image(ref, no_cache))

    def build_status(self, build_id: str, *, start: int = 0) -> ImageBuildPublic:
        """The build, with its log's lines from ``start`` on."""
        return self.client.call(calls.image_build(build_id, start))

    def wait_for_build(self, build_id: str, *, timeout: float = 1800) -> ImageBuildPublic:
        """Until the build ends (its whole log included); ``BuildTimeout`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            build = self.build_status(build_id)
            if build.state != "running":
                return build
            if time.monotonic() >= deadline:
                msg = f"build {build_id} still running after {timeout:g} s"
                raise BuildTimeout(msg)
            time.sleep(POLL_SECONDS)

    def import_catalog(self) -> CatalogImportPublic:
        """Apply the service's catalog file again (a retired version stays retired)."""
        return self.client.call(calls.import_catalog())

    def audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        target: str | None = None,
        before: float | None = None,
        limit: int = 100,
    ) -> AuditPage:
        """What operators did, newest first; the next page: ``before=page.next``."""
        return self.client.call(calls.audit(actor, action, target, before, limit))


class AsyncAdmin:
    def __init__(self, client: AsyncCaller) -> None:
        self.client = client

    async def images(self) -> CatalogImagesPublic:
        return await self.client.call(calls.catalog_images())

    async def image(self, ref: str) -> CatalogImageDetail:
        return await self.client.call(calls.catalog_image(ref))

    async def add_image(self, image: NewCatalogImage | dict[str, Any]) -> NewCatalogImageAnswer:
        return await self.client.call(calls.add_catalog_image(image))

    async def set_state(self, ref: str, state: ImageState) -> CatalogImagePublic:
        return await self.client.call(calls.set_image_state(ref, state))

    async def make_default(self, ref: str) -> CatalogImagePublic:
        return await self.client.call(calls.make_default_image(ref))

    async def build(self, ref: str, *, no_cache: bool = False) -> ImageBuildPublic:
        return await self.client.call(calls.build_catalog_image(ref, no_cache))

    async def build_status(self, build_id: str, *, start: int = 0) -> ImageBuildPublic:
        return await self.client.call(calls.image_build(build_id, start))

    async def wait_for_build(self, build_id: str, *, timeout: float = 1800) -> ImageBuildPublic:
        deadline = time.monotonic() + timeout
        while True:
            build = await self.build_status(build_id)
            if build.state != "running":
                return build
            if time.monotonic() >= deadline:
                msg = f"build {build_id} still running after {timeout:g} s"
                raise BuildTimeout(msg)
            await asyncio.sleep(POLL_SECONDS)

    async def import_catalog(self) -> CatalogImportPublic:
        return await self.client.call(calls.import_catalog())

    async def audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        target: str | None = None,
        before: float | None = None,
        limit: int = 100,
    ) -> AuditPage:
        return await self.client.call(calls.audit(actor, action, target, before, limit))
