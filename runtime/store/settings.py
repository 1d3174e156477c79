"""The store settings live in ``runtime.seams.store_settings`` (re-exported for the
implementations beside this module)."""

from runtime.seams.store_settings import (
    RedisStoreSettings as RedisStoreSettings,
)
from runtime.seams.store_settings import (
    SqliteStoreSettings as SqliteStoreSettings,
)
from runtime.seams.store_settings import (
    StoreSettings as StoreSettings,
)
