"""The shared store for several service instances: Redis.

Key names are in ``runtime/store/keys.py``. Every change that touches more than
one key, or must compare before it writes, is one Lua script (atomic on the
server). The scripts touch only the keys they are given, except ``DELETE_FILES`` and
``FORGET_CONVERSATION``, which derive keys from ids (fine on one Redis; not on Redis
Cluster).
"""

from __future__ import annotations

from runtime.store.base import Stores
from runtime.store.redis.agents import RedisAgents
from runtime.store.redis.audit import RedisAudit
from runtime.store.redis.capacity import RedisCapacity
from runtime.store.redis.catalog import RedisCatalog
from runtime.store.redis.client import connect, redis_errors
from runtime.store.redis.console import RedisConsoleSessions
from runtime.store.redis.deployment import RedisDeployment
from runtime.store.redis.e2b import RedisE2b
from runtime.store.redis.executions import RedisExecutions
from runtime.store.redis.files import RedisFiles
from runtime.store.redis.idempotency import RedisIdempotency
from runtime.store.redis.knowledge import RedisKnowledge
from runtime.store.redis.leases import RedisLeases
from runtime.store.redis.memory import RedisMemory
from runtime.store.redis.migrations import migrate
from runtime.store.redis.network import RedisNetwork
from runtime.store.redis.pool import RedisPool
from runtime.store.redis.revocations import RedisRevocations
from runtime.store.redis.sessions import RedisDeletions, RedisSessions
from runtime.store.redis.snapshots import RedisSnapshots


def open_redis(url: str) -> Stores:
    """Every concern over one connection pool to the Redis at ``url``, its schema
    brought up to date first (``migrations.py``)."""
    client = connect(url)
    try:
        migrate(client)
    except BaseException:
        client.close()
        raise

    def ping() -> None:
        with redis_errors():
            client.ping()

    return Stores(
        sessions=RedisSessions(client),
        leases=RedisLeases(client),
        capacity=RedisCapacity(client),
        files=RedisFiles(client),
        deletions=RedisDeletions(client),
        executions=RedisExecutions(client),
        pool=RedisPool(client),
        idempotency=RedisIdempotency(client),
        e2b=RedisE2b(client),
        deployment=RedisDeployment(client),
        revocations=RedisRevocations(client),
        network=RedisNetwork(client),
        snapshots=RedisSnapshots(client),
        agents=RedisAgents(client),
        console=RedisConsoleSessions(client),
        memory=RedisMemory(client),
        knowledge=RedisKnowledge(client),
        catalog=RedisCatalog(client),
        audit=RedisAudit(client),
        ping=ping,
        close=client.close,
    )
