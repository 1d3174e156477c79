"""State stores, chosen by ``SIESTA_STORE__URL`` and imported lazily."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from runtime.config import Settings
from runtime.errors import ConfigurationError
from runtime.store.base import Store

REDIS_SCHEMES = ("redis", "rediss", "unix")


def parse_store_url(url: str) -> tuple[str, str]:
    """``("sqlite", path)`` or ``("redis", url)``; anything else is refused at start-up."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        path = url.removeprefix("sqlite://")
        if not path:
            msg = f"SIESTA_STORE__URL {url!r} names no database file"
            raise ConfigurationError(msg)
        return "sqlite", path
    if scheme in REDIS_SCHEMES:
        return "redis", url
    msg = f"SIESTA_STORE__URL scheme {scheme!r} is not supported (use sqlite:// or redis://)"
    raise ConfigurationError(msg)


def build_store(settings: Settings) -> Store:
    """``sqlite://PATH`` (``sqlite:///abs/file.db``) or ``redis://`` / ``rediss://``."""
    kind, target = parse_store_url(settings.store_url)
    if kind == "sqlite":
        from runtime.store.sqlite import SqliteStore

        return SqliteStore(Path(target))
    from runtime.store.redis import RedisStore

    return RedisStore(target)
