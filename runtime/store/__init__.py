"""State stores, chosen by ``SIESTA_STORE__*`` and imported lazily."""

from __future__ import annotations

from runtime.config import RedisStoreSettings, Settings
from runtime.store.base import Stores


def open_stores(settings: Settings) -> Stores:
    """SQLite (``DATA_DIR/siesta.db`` unless a path is set) or Redis."""
    if isinstance(settings.store, RedisStoreSettings):
        from runtime.store.redis import open_redis

        return open_redis(settings.store.url)
    from runtime.store.sqlite import open_sqlite

    return open_sqlite(settings.sqlite_path)
