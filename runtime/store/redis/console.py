"""Console sessions in Redis: one string per session (the record as JSON) that Redis
expires at the session's end; a read also checks the end against the caller's clock."""

from __future__ import annotations

import math
from typing import Any

import redis

from runtime.core.operator_records import ConsoleSession
from runtime.store import keys
from runtime.store.redis.client import redis_errors


class RedisConsoleSessions:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def put_console_session(self, session: ConsoleSession) -> None:
        with redis_errors():
            self._redis.set(
                keys.console_session(session.id_digest),
                session.to_json(),
                pxat=math.ceil(session.expires_at * 1000),
            )

    def get_console_session(self, id_digest: str, now: float) -> ConsoleSession | None:
        with redis_errors():
            body: Any = self._redis.get(keys.console_session(id_digest))
        if body is None:
            return None
        session = ConsoleSession.from_json(str(body))
        return session if session.expires_at > now else None

    def delete_console_session(self, id_digest: str) -> bool:
        with redis_errors():
            return bool(self._redis.delete(keys.console_session(id_digest)))
