"""The deployment id and egress key, each set once in Redis (SET NX)."""

from __future__ import annotations

import redis

from runtime.store import keys
from runtime.store.redis.client import redis_errors


class RedisDeployment:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def claim_deployment_id(self, candidate: str) -> str:
        return self._claim(keys.DEPLOYMENT_ID, candidate)

    def claim_egress_key(self, candidate: str) -> str:
        return self._claim(keys.EGRESS_KEY, candidate)

    def _claim(self, key: str, candidate: str) -> str:
        with redis_errors():
            self._redis.set(key, candidate, nx=True)
            return str(self._redis.get(key))
