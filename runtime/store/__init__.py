"""State stores, chosen by ``SIESTA_STORE__URL`` and imported lazily."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from runtime.config import Settings
from runtime.errors import ConfigurationError
from runtime.store.base import Store


def build_store(settings: Settings) -> Store:
    """``sqlite://PATH`` (``sqlite:///abs/file.db``) or ``redis://`` / ``rediss://``."""
    url = settings.store_url
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        from runtime.store.sqlite import SqliteStore

        path = url.removeprefix("sqlite://")
        if not path:
            msg = f"SIESTA_STORE__URL {url!r} names no database file"
            raise ConfigurationError(msg)
        return SqliteStore(Path(path))
    if scheme in ("redis", "rediss", "unix"):
        from runtime.store.redis import RedisStore

        return RedisStore(url)
    msg = f"SIESTA_STORE__URL scheme {scheme!r} is not supported (use sqlite:// or redis://)"
    raise ConfigurationError(msg)
