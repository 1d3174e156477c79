"""Records of the operators' side: the audit trail, the image builds (the catalog's
versions are ``runtime.images.catalog.CatalogImage``, kept as JSON) and the console's
sessions."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class AuditEntry:
    """One operator action (``GET /v1/admin/audit``): who did what to which, when,
    from where, and through which surface."""

    entry_id: str
    at: float
    actor: str
    """The token's name (``SIESTA_TOKENS``), the console's signed-in token included."""
    action: str
    """Dotted verb, e.g. ``image.retire``, ``sandbox.delete``, ``approval.approve``."""
    target: str
    source: str
    """The client's address as the service saw it."""
    via: str
    """``api`` or ``console``."""
    details: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AuditEntry:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class AuditFilter:
    actor: str | None = None
    action: str | None = None
    """An exact action, or a prefix ending in ``.`` (``image.``)."""
    target: str | None = None
    before: float | None = None
    """Only entries older than this (the next page: the last entry's ``at``)."""
    limit: int = 100


@dataclass(frozen=True)
class ImageBuild:
    """One build of a catalog image (``POST /v1/admin/images/{ref}/builds``); its log
    lines are kept apart, appended as the build goes."""

    build_id: str
    ref: str
    """``id:tag`` of the image built."""
    state: str
    """``running``, ``succeeded`` or ``failed``."""
    requested_by: str
    started_at: float
    finished_at: float | None = None
    digest: str | None = None
    """The image the build produced (Docker's image id)."""
    error: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ImageBuild:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class ConsoleSession:
    """An operator signed in to the web console (``api/console``), kept under the
    SHA-256 of its cookie's random id: the store never holds the id itself."""

    id_digest: str
    """Hex SHA-256 of the cookie's id."""
    csrf: str
    """What every change the session makes must send back (the form's ``csrf``)."""
    token_name: str
    """The name of the token signed in with (``admin`` scope): who acts."""
    token_digest: str
    """Hex SHA-256 of that token, checked against the configured tokens on every
    request: a token taken out of the configuration ends its sessions."""
    created_at: float
    expires_at: float
    source: str
    """The client address that signed in."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ConsoleSession:
        return cls(**json.loads(text))
