"""An org's knowledge bases (``X-Siesta-Org``), which agents search through the
``knowledge_base`` System Tool. Operators make them, add and remove documents (the
``admin`` scope: what a base holds is the org's configuration); whoever runs tools may
list, read and search them (``tools``). Another org's bases and versions answer 404,
as if they did not exist.

Adding a document answers at once (202, ``queued``); the service indexes it in the
background, and ``GET .../documents/{id}`` says how that went.
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Request, Response

from siesta_contract.functions.knowledge import SearchKnowledgeBaseResult
from siesta_contract.knowledge import (
    ContentVersionPublic,
    ContentVersionsPublic,
    DocumentAdd,
    KnowledgeBaseCreate,
    KnowledgeBasePublic,
    KnowledgeBasesPublic,
    KnowledgeSearch,
)

from api import audit
from api.deps import CallerDep, OrgDep, ServicesDep, requires
from api.responses import COMMON, error_responses
from runtime.core.knowledge_records import ContentVersion, KnowledgeBase
from runtime.services import Services

router = APIRouter(
    prefix="/v1/knowledge-bases",
    tags=["knowledge"],
    responses=error_responses(*COMMON, 404, 409),
)


@router.post("", status_code=201, dependencies=requires("admin"))
async def create_base(
    body: KnowledgeBaseCreate,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    org: OrgDep,
) -> KnowledgeBasePublic:
    """A new, empty base of the org. 409 ``knowledge_limit_reached`` at the org's limit
    (``SIESTA_KNOWLEDGE__MAX_BASES_PER_ORG``)."""

    def create() -> KnowledgeBase:
        base = services.knowledge.create(org, body)
        target = f"{org}/{base.base_id}"
        audit.record(services, caller, request, "knowledge_base.create", target)
        return base

    base = await to_thread.run_sync(create)
    return KnowledgeBasePublic(
        knowledgeBaseId=base.base_id,
        name=base.name,
        description=base.description,
        createdAt=base.created_at,
        documents=0,
        chunks=0,
    )


@router.get("", dependencies=requires("tools"))
async def list_bases(services: ServicesDep, org: OrgDep) -> KnowledgeBasesPublic:
    """The org's bases, oldest first."""

    def listed() -> list[KnowledgeBasePublic]:
        return [public(services, base) for base in services.knowledge.list(org)]

    return KnowledgeBasesPublic(knowledgeBases=await to_thread.run_sync(listed))


@router.get("/{base_id}", dependencies=requires("tools"))
async def get_base(base_id: str, services: ServicesDep, org: OrgDep) -> KnowledgeBasePublic:
    return await to_thread.run_sync(lambda: public(services, services.knowledge.get(org, base_id)))


@router.delete("/{base_id}", status_code=204, dependencies=requires("admin"))
async def delete_base(
    base_id: str,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    org: OrgDep,
) -> Response:
    """The base, every version it holds and their passages."""

    def delete() -> None:
        services.knowledge.delete(org, base_id)
        audit.record(services, caller, request, "knowledge_base.delete", f"{org}/{base_id}")

    await to_thread.run_sync(delete)
    return Response(status_code=204)


@router.post(
    "/{base_id}/documents",
    status_code=202,
    dependencies=requires("admin"),
    responses=error_responses(413),
)
async def add_document(
    base_id: str,
    body: DocumentAdd,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    org: OrgDep,
    response: Response,
) -> ContentVersionPublic:
    """A document, from an upload (``text`` or ``contentBase64`` with its ``name``), a
    conversation's file or artifact, or a URL on the deployment's egress allowlist.
    202 with a ``queued`` version; the same name again with the same content answers
    200 with the version it already has (nothing is indexed again), with other
    content a new version (the older stays searchable until removed). 413
    ``document_too_large`` past ``SIESTA_KNOWLEDGE__MAX_DOCUMENT_BYTES``; 422
    ``unsupported_document`` for a format no reader knows; 409
    ``knowledge_limit_reached`` past ``SIESTA_KNOWLEDGE__MAX_VERSIONS_PER_BASE``."""

    def add() -> tuple[ContentVersion, bool]:
        version, created = services.knowledge.add_document(org, base_id, body)
        if created:
            # The action and the version, never the content: it is the org's data.
            target = f"{org}/{base_id}/{version.version_id}"
            audit.record(services, caller, request, "knowledge_base.add_document", target)
        return version, created

    version, created = await to_thread.run_sync(add)
    if created:
        services.indexer.wake()
    else:
        response.status_code = 200
    return version_public(version)


@router.get("/{base_id}/documents", dependencies=requires("tools"))
async def list_documents(base_id: str, services: ServicesDep, org: OrgDep) -> ContentVersionsPublic:
    """The base's content versions, oldest first, each with how its indexing went."""
    found = await to_thread.run_sync(lambda: services.knowledge.versions(org, base_id))
    return ContentVersionsPublic(versions=[version_public(v) for v in found])


@router.get("/{base_id}/documents/{version_id}", dependencies=requires("tools"))
async def get_document(
    base_id: str, version_id: str, services: ServicesDep, org: OrgDep
) -> ContentVersionPublic:
    """One version: ``queued``, ``indexing``, ``ready`` or ``failed`` (``error`` says why)."""
    found = await to_thread.run_sync(lambda: services.knowledge.version(org, base_id, version_id))
    return version_public(found)


@router.delete("/{base_id}/documents/{version_id}", status_code=204, dependencies=requires("admin"))
async def remove_document(
    base_id: str,
    version_id: str,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    org: OrgDep,
) -> Response:
    """The version and its passages: searches stop finding it at once."""

    def remove() -> None:
        services.knowledge.remove(org, base_id, version_id)
        target = f"{org}/{base_id}/{version_id}"
        audit.record(services, caller, request, "knowledge_base.remove_document", target)

    await to_thread.run_sync(remove)
    return Response(status_code=204)


@router.post("/{base_id}/search", dependencies=requires("tools"))
async def search(
    base_id: str, body: KnowledgeSearch, services: ServicesDep, org: OrgDep
) -> SearchKnowledgeBaseResult:
    """What ``search_knowledge_base`` answers an agent, for trying a base out."""
    return await to_thread.run_sync(
        lambda: services.knowledge.search(org, base_id, body.query, body.topN)
    )


def public(services: Services, base: KnowledgeBase) -> KnowledgeBasePublic:
    documents, chunks = services.knowledge.counts(base.org, base.base_id)
    return KnowledgeBasePublic(
        knowledgeBaseId=base.base_id,
        name=base.name,
        description=base.description,
        createdAt=base.created_at,
        documents=documents,
        chunks=chunks,
    )


def version_public(version: ContentVersion) -> ContentVersionPublic:
    return ContentVersionPublic(
        contentVersionId=version.version_id,
        documentId=version.document_id,
        knowledgeBaseId=version.base_id,
        name=version.name,
        source=version.source,
        contentType=version.content_type,
        size=version.size,
        sha256=version.sha256,
        status=version.status,
        title=version.title,
        error=version.error,
        chars=version.chars,
        chunks=version.chunks,
        createdAt=version.created_at,
        indexedAt=version.indexed_at or None,
    )
