"""The OpenAPI document: generated from the routes, plus what signatures cannot say.

The context headers and ids are checked by our own code (so that a missing header
is ``missing_context`` 400, not a generic validation error); this states the same
rules in the document: which headers a route requires, what an id may be. The
models (``siesta_contract``) know no deployment; the document adds the two facts of
this one that refuse requests: which base images the operators' catalog enables, and
the count limits that are settings (read when the document is made).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from anyio import to_thread
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from siesta_contract.text import ID_MAX_CHARS, ID_PATTERN
from siesta_contract.text import IDEMPOTENCY_KEY as IDEMPOTENCY_KEY_PATTERN

from api.responses import describe
from runtime.settings import Settings

ID_SCHEMA = {"type": "string", "pattern": ID_PATTERN, "minLength": 1, "maxLength": ID_MAX_CHARS}
REQUIRED_HEADERS = {
    "x-siesta-org": "The organisation (trusted context from the agent backend)",
    "x-siesta-user": "The user on whose behalf the agent acts",
}
"""Required wherever a route declares them (``X-Siesta-User`` only on conversation routes).
A token bound to an org or a user supplies them when they are left out, which OpenAPI
cannot say (docs/concepts/api.md names it): the document states what an unbound token sends."""
ID_PATH_PARAMETERS = ("conversation_id",)
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
    "description": "Safe retries: a retry with the same key and request gets the first "
    "answer again (`Idempotent-Replayed: true`) and runs nothing; another request with "
    "the key is 409 `idempotency_key_reused`; a retry while the first runs waits for it, "
    "up to `SIESTA_IDEMPOTENCY__WAIT_SECONDS`, then 409 `session_busy`. Kept for "
    "`SIESTA_IDEMPOTENCY__TTL_SECONDS`, scoped by token and org.",
}
KEY_CONFLICT = {
    "description": describe(409),
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
}
"""What any keyed request may meet (the key's other request, or its first run)."""
MUTATING = ("post", "put", "patch", "delete")

log = logging.getLogger(__name__)


def install(app: FastAPI) -> None:
    building = threading.Lock()  # one build: callers meanwhile wait for it

    def openapi() -> dict[str, Any]:
        with building:
            if app.openapi_schema is None:
                app.openapi_schema = _build(app)
        _refresh_images(app.openapi_schema, _enabled_images(app))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


async def document(app: FastAPI) -> dict[str, Any]:
    """The document, for code on the event loop: while it is not built yet (the first
    build, or the warm-up's, takes over a second and holds a lock), it is built, or
    waited for, in a worker thread, so the loop serves other requests meanwhile."""
    if app.openapi_schema is not None:  # its paths and headers: not the images' enum
        return app.openapi_schema
    return await to_thread.run_sync(app.openapi)


def warm(app: FastAPI) -> threading.Thread:
    """Build the document now, in the background: the idempotency middleware reads it
    on a keyed request, and building it takes over a second (every route's models), a
    delay the first such request of an instance must not pay. Returns the thread: the
    app's shutdown waits for it (``finish_warming``)."""

    def build() -> None:
        try:
            app.openapi()
        except Exception:  # the next caller builds it again, and sees the error
            log.exception("the OpenAPI document could not be built ahead")

    thread = threading.Thread(target=build, name="openapi-warm", daemon=True)
    thread.start()
    return thread


def finish_warming(thread: threading.Thread, timeout: float = 30.0) -> None:
    """Wait for the background build at shutdown. No thread of an app outlives it: a
    build still running would go on in a process that may be making its next app, and
    FastAPI and pydantic silence their own warnings with ``warnings.catch_warnings``,
    whose filters are the process's, not the thread's (two such blocks on two threads
    restore each other's filters, and a silenced warning escapes)."""
    thread.join(timeout)


def _build(app: FastAPI) -> dict[str, Any]:
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    images = _enabled_images(app)
    for path, path_item in schema.get("paths", {}).items():
        for method, operation in path_item.items():
            _state_context_rules(operation, images)
            if method in MUTATING and path.startswith("/v1/") and "/ports/" not in path:
                operation.setdefault("parameters", []).append(dict(IDEMPOTENCY_KEY))
                operation["responses"].setdefault("409", dict(KEY_CONFLICT))
    _state_deployment(schema.get("components", {}).get("schemas", {}), app, images)
    return schema


def deployment_limits(
    settings: Settings, *, keeps_memory: bool = False
) -> dict[tuple[str, str], dict[str, Any]]:
    """The keywords the document adds to the contract's schemas, by (model, field);
    ``keeps_memory``: whether the provider's snapshots can keep memory (none can yet:
    then ``keepMemory`` may only be false, as this deployment answers it)."""
    limits: dict[tuple[str, str], dict[str, Any]] = {
        ("RunCommandArgs", "files"): {"maxItems": settings.files.max_stage_files},
        ("PublishFilesArgs", "paths"): {"maxItems": settings.files.max_publish_paths},
        ("MemoryEntryCreate", "key"): {"maxLength": settings.memory.max_key_chars},
        ("MemoryEntryCreate", "content"): {"maxLength": settings.memory.max_content_chars},
        # The sum of keys and values (max_metadata_bytes) is more than JSON Schema says.
        ("FsMetadataArgs", "metadata"): {"maxProperties": settings.files.max_metadata_keys},
        # ASCII only: characters are bytes.
        ("SecretPut", "value"): {"maxLength": settings.egress.max_secret_bytes},
        ("KnowledgeSearch", "query"): {"maxLength": settings.knowledge.max_query_chars},
        ("ForksCreate", "conversationIds"): {"maxItems": settings.snapshots.max_forks_per_call},
    }
    if not keeps_memory:
        for model in ("SnapshotCreate", "ForkCreate", "ForksCreate"):
            limits[(model, "keepMemory")] = {"const": False}
    return limits


def _state_deployment(schemas: dict[str, Any], app: FastAPI, images: list[str]) -> None:
    services = getattr(app.state, "services", None)
    if services is None:
        return
    _refresh_images({"components": {"schemas": schemas}}, images)
    keeps_memory = services.provider.lifecycle.memory_snapshot_refusal() is None
    limits = deployment_limits(services.settings, keeps_memory=keeps_memory)
    for (model, field), keywords in limits.items():
        if model in schemas:
            schemas[model]["properties"][field].update(keywords)


def _enabled_images(app: FastAPI) -> list[str]:
    """What an agent may select now: each enabled version's ``id:tag``, and the bare id
    of a default version."""
    services = getattr(app.state, "services", None)
    if services is None:
        return []
    catalog = services.catalog
    selections: list[str] = []
    for image in catalog.enabled():
        if catalog.selection_of(image) == image.id:
            selections.append(image.id)
        selections.append(image.ref)
    return selections


def _refresh_images(document: dict[str, Any], images: list[str]) -> None:
    """The catalog changes while the service runs (``/v1/admin/images``): the
    selection's enum follows it in the built document (one list swapped in, cheap)."""
    selection = document.get("components", {}).get("schemas", {}).get("ImageSelection")
    if selection is None or not images:
        return
    base_image = selection["properties"]["baseImage"]
    if base_image.get("enum") != images:
        base_image["enum"] = images


def _state_context_rules(operation: dict[str, Any], images: list[str]) -> None:
    for parameter in operation.get("parameters", []):
        name = str(parameter.get("name", "")).lower()
        if parameter.get("in") == "header" and name in REQUIRED_HEADERS:
            parameter.update(
                required=True, schema=dict(ID_SCHEMA), description=REQUIRED_HEADERS[name]
            )
        elif parameter.get("in") == "header" and name == "x-siesta-base-image":
            # Not an enum: only the first operation of a conversation reads it, and a
            # conversation keeps its image even when operators withdraw it later.
            parameter["description"] = (
                "The agent's base image, a catalog id (its default tag) or `id:tag`; read "
                "when the conversation's sandbox is made (`GET /v1/images` lists them)"
            )
        elif parameter.get("in") == "path" and name in ID_PATH_PARAMETERS:
            parameter["schema"] = dict(ID_SCHEMA)
