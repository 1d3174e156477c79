"""The Redis store's schema: an ordered list of forward migrations.

``keys.SCHEMA_VERSION`` records how many have run; a store from before versions
existed has none, which reads 0. A released migration never changes: a new key
layout is a new function appended to ``MIGRATIONS``, with a docstring saying what
it changes. Redis has no transaction around arbitrary work, so ``migrate`` holds a
lock key while it runs the missing ones and records each as it finishes: replicas
starting together wait for the first, then find nothing left to do; a migrator
that dies midway leaves the lock to expire and its unfinished step to run again,
so every step must be safe to repeat.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import redis
import redis.exceptions

from runtime.core.errors import StateUnavailable
from runtime.store import keys
from runtime.store.migrations import refuse_newer
from runtime.store.redis.client import redis_errors

Migration = Callable[[redis.Redis], None]

LOCK_SECONDS = 120.0
"""How long the lock outlives a migrator that died; also how long the others wait."""


def release_0_1_0(client: redis.Redis) -> None:
    """1: the keys of release 0.1.0, which recorded no version: nothing to change.

    An unversioned store is 0.1.0's (or empty); this step only gives it a number, so
    that the next layout change is migration 2.
    """


MIGRATIONS: tuple[Migration, ...] = (release_0_1_0,)
"""In order; ``keys.SCHEMA_VERSION`` N means the first N have run."""


def migrate(client: redis.Redis, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Run the migrations the store lacks; the schema version it is at after.

    Raises ``StoreSchemaTooNew`` for a store a newer release has migrated.
    """
    with redis_errors():
        if _version(client, len(migrations)) == len(migrations):
            return len(migrations)  # every start after the first: no lock to take
        lock = client.lock(keys.SCHEMA_LOCK, timeout=LOCK_SECONDS, blocking_timeout=LOCK_SECONDS)
        if not lock.acquire():
            msg = f"another instance has been migrating the Redis store for {LOCK_SECONDS:.0f} s"
            raise StateUnavailable(msg)
        try:
            found = _version(client, len(migrations))  # as the instance before us left it
            for number, migration in enumerate(migrations[found:], start=found + 1):
                migration(client)
                client.set(keys.SCHEMA_VERSION, number)
        finally:
            # Expired meanwhile: harmless, the work is recorded step by step.
            with contextlib.suppress(redis.exceptions.LockNotOwnedError):
                lock.release()
    return len(migrations)


def _version(client: redis.Redis, known: int) -> int:
    found = int(str(client.get(keys.SCHEMA_VERSION) or 0))
    refuse_newer(found, known, "the Redis store")
    return found
