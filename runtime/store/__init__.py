"""State stores, chosen by ``SIESTA_STORE__*`` and imported lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.store.base import Stores

if TYPE_CHECKING:
    from runtime.core.config import Settings


def open_stores(settings: Settings) -> Stores:
    """SQLite (``DATA_DIR/siesta.db`` unless a path is set) or Redis."""
    # Imported here: the egress proxy process reads the store without the settings.
    from runtime.core.config import RedisStoreSettings

    if isinstance(settings.store, RedisStoreSettings):
        from runtime.store.redis import open_redis

        return open_redis(settings.store.url)
    from runtime.store.sqlite import open_sqlite

    return open_sqlite(settings.sqlite_path)
