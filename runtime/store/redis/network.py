"""Conversations' network rules and egress refusal counts, and orgs' sealed secrets
(a hash per org; adding checks the org's count in the same script), in Redis."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import redis

from runtime.core.network_rules import EgressRefusals, NetworkRules
from runtime.core.records import SealedSecret, conversation_key
from runtime.store import keys
from runtime.store.redis.client import redis_errors

PUT_SECRET = """
-- KEYS[1] the org's secrets hash; ARGV[1] name, ARGV[2] the record as JSON, ARGV[3] limit
-- returns 1 when kept, 0 when the name is new and the org has the limit's count already
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0
   and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


class RedisNetwork:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._put_secret = client.register_script(PUT_SECRET)

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

    def put_secret(self, secret: SealedSecret, limit: int) -> bool:
        known = self.secret(secret.org, secret.name)
        if known is not None:  # a replacement keeps when the name was first given
            secret = replace(secret, created_at=known.created_at)
        body = json.dumps(
            {
                "sealed": secret.sealed,
                "created_at": secret.created_at,
                "updated_at": secret.updated_at,
                "size": secret.size,
                "hosts": list(secret.hosts),
                "header": secret.header,
            }
        )
        with redis_errors():
            kept = self._put_secret(
                keys=[keys.egress_secrets(secret.org)], args=[secret.name, body, limit]
            )
        return bool(int(kept))

    def secret(self, org: str, name: str) -> SealedSecret | None:
        with redis_errors():
            raw: Any = self._redis.hget(keys.egress_secrets(org), name)
        return _secret(org, name, str(raw)) if raw is not None else None

    def org_secrets(self, org: str) -> list[SealedSecret]:
        with redis_errors():
            raw: Any = self._redis.hgetall(keys.egress_secrets(org))
        return [_secret(org, str(name), str(body)) for name, body in sorted(raw.items())]

    def delete_secret(self, org: str, name: str) -> bool:
        with redis_errors():
            return bool(self._redis.hdel(keys.egress_secrets(org), name))


def _secret(org: str, name: str, body: str) -> SealedSecret:
    data = json.loads(body)
    return SealedSecret(
        org,
        name,
        str(data["sealed"]),
        float(data["created_at"]),
        float(data["updated_at"]),
        int(data["size"]),
        tuple(str(host) for host in data["hosts"]),
        str(data["header"]),
    )
