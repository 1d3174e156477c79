"""Sandboxes made through the E2B API, in Redis: a hash per org (id → the record as
JSON) and one sorted set of every sandbox's ``org/id`` by its end time."""

from __future__ import annotations

from typing import Any

import redis

from runtime.core.records import E2bSandbox
from runtime.store import keys
from runtime.store.redis.client import redis_errors


class RedisE2b:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def put_e2b(self, sandbox: E2bSandbox) -> None:
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(keys.e2b_sandboxes(sandbox.org), sandbox.sandbox_id, sandbox.to_json())
            pipe.zadd(keys.E2B_ENDS, {f"{sandbox.org}/{sandbox.sandbox_id}": sandbox.end_at})
            pipe.hset(keys.E2B_ORGS, sandbox.sandbox_id, sandbox.org)
            pipe.execute()

    def get_e2b(self, org: str, sandbox_id: str) -> E2bSandbox | None:
        with redis_errors():
            body: Any = self._redis.hget(keys.e2b_sandboxes(org), sandbox_id)
        return E2bSandbox.from_json(str(body)) if body is not None else None

    def list_e2b(self, org: str) -> list[E2bSandbox]:
        with redis_errors():
            bodies: Any = self._redis.hvals(keys.e2b_sandboxes(org))
        found = [E2bSandbox.from_json(str(body)) for body in bodies]
        return sorted(found, key=lambda s: (s.started_at, s.sandbox_id))

    def find_e2b(self, sandbox_id: str) -> E2bSandbox | None:
        with redis_errors():
            org: Any = self._redis.hget(keys.E2B_ORGS, sandbox_id)
        return None if org is None else self.get_e2b(str(org), sandbox_id)

    def delete_e2b(self, org: str, sandbox_id: str) -> bool:
        with redis_errors():
            if not self._redis.hdel(keys.e2b_sandboxes(org), sandbox_id):
                return False  # none, or the id is another org's: its entries stay
            pipe = self._redis.pipeline(transaction=True)
            pipe.zrem(keys.E2B_ENDS, f"{org}/{sandbox_id}")
            pipe.hdel(keys.E2B_ORGS, sandbox_id)
            pipe.execute()
        return True

    def due_e2b(self, now: float) -> list[E2bSandbox]:
        with redis_errors():
            entries: Any = self._redis.zrangebyscore(keys.E2B_ENDS, "-inf", now)
            due = []
            for entry in entries:
                org, sandbox_id = str(entry).split("/", 1)
                sandbox = self.get_e2b(org, sandbox_id)
                if sandbox is not None:
                    due.append(sandbox)
        return due
