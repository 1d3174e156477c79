"""The deployment id, set once in Redis (SET NX)."""

from __future__ import annotations

import redis

from runtime.store import keys
from runtime.store.redis.client import redis_errors


class RedisDeployment:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def claim_deployment_id(self, candidate: str) -> str:
        with redis_errors():
            self._redis.set(keys.DEPLOYMENT_ID, candidate, nx=True)
            return str(self._redis.get(keys.DEPLOYMENT_ID))
