"""Conversations' network rules and egress refusal counts in Redis."""

from __future__ import annotations

import math
from typing import Any

import redis

from runtime.core.network_rules import EgressRefusals, NetworkRules
from runtime.core.records import conversation_key
from runtime.store import keys
from runtime.store.redis.client import redis_errors


class RedisNetwork:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def set_network_rules(self, org: str, conversation: str, rules: NetworkRules) -> None:
        with redis_errors():
            self._redis.set(
                keys.network_rules(conversation_key(org, conversation)), rules.to_json()
            )

    def network_rules(self, org: str, conversation: str) -> NetworkRules | None:
        with redis_errors():
            raw: Any = self._redis.get(keys.network_rules(conversation_key(org, conversation)))
        return NetworkRules.from_json(str(raw)) if raw is not None else None

    def add_egress_refusals(
        self, org: str, conversation: str, refusals: EgressRefusals, keep_seconds: float
    ) -> None:
        key = keys.egress_refusals(conversation_key(org, conversation))
        with redis_errors(), self._redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(key, "count", refusals.count)
            pipe.hset(
                key,
                mapping={
                    "host": refusals.last_host,
                    "reason": refusals.last_reason,
                    "at": repr(refusals.last_at),
                },
            )
            pipe.expire(key, max(1, math.ceil(keep_seconds)))
            pipe.execute()

    def egress_refusals(self, org: str, conversation: str) -> EgressRefusals | None:
        with redis_errors():
            raw: Any = self._redis.hgetall(
                keys.egress_refusals(conversation_key(org, conversation))
            )
        if not raw or "count" not in raw:
            return None
        return EgressRefusals(int(raw["count"]), raw["host"], raw["reason"], float(raw["at"]))

    def forget_network(self, org: str, conversation: str) -> None:
        key = conversation_key(org, conversation)
        with redis_errors():
            self._redis.delete(keys.network_rules(key), keys.egress_refusals(key))
