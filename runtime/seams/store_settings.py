"""Settings of the state store (SQLite or Redis)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.settings import without


class SqliteStoreSettings(BaseModel):
    """The embedded store: one SQLite file, one service instance."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["sqlite"] = "sqlite"
    path: Path | None = None
    """The database file; default ``DATA_DIR/siesta.db``."""


class RedisStoreSettings(BaseModel):
    """The shared store of several service instances."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["redis"] = "redis"
    url: str = Field(pattern=r"^(redis|rediss|unix)://")
    """``redis://host:port/db``, ``rediss://`` (TLS) or ``unix:///path.sock``."""


StoreSettings = Annotated[SqliteStoreSettings | RedisStoreSettings, Field(discriminator="type")]


def _store_from_url(value: Any) -> Any:
    """``SIESTA_STORE__URL`` alone (the short form) picks the store by its scheme:
    ``sqlite:///path`` or ``redis://...``; anything else is refused here, at start-up."""
    if not isinstance(value, dict) or "type" in value or "url" not in value:
        return value
    url = str(value["url"])
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        path = url.removeprefix("sqlite://")
        if not path:
            msg = f"SIESTA_STORE__URL {url!r} names no database file"
            raise ValueError(msg)
        return {"type": "sqlite", "path": path, **without(value, "url")}
    if scheme in ("redis", "rediss", "unix"):
        return {"type": "redis", **value}
    msg = f"SIESTA_STORE__URL scheme {scheme!r} is not supported (use sqlite:// or redis://)"
    raise ValueError(msg)
