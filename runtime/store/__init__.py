"""State stores, chosen by ``SIESTA_STORE__*`` and imported lazily."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runtime.store.base import Stores

if TYPE_CHECKING:
    from runtime.store.settings import StoreSettings


def open_stores(settings: StoreSettings, sqlite_path: Path) -> Stores:
    """SQLite (``DATA_DIR/siesta.db`` unless a path is set) or Redis."""
    # Imported here: the egress proxy process reads the store without the settings.
    from runtime.store.settings import RedisStoreSettings

    if isinstance(settings, RedisStoreSettings):
        from runtime.store.redis import open_redis

        return open_redis(settings.url)
    from runtime.store.sqlite import open_sqlite

    return open_sqlite(sqlite_path)
