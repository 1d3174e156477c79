"""Revoked egress credentials in Redis: one stream, read on by entry id.

Redis gives stream entries ids that only grow, at the moment they are added, so a
reader that remembers the last id it saw misses nothing and sees nothing twice.
Ids are the revocation's time in milliseconds (or the newest id's, when a writer's
clock lags), so trimming by id trims by age.
"""

from __future__ import annotations

from typing import Any

import redis

from runtime.core.records import EgressRevocation
from runtime.store import keys
from runtime.store.redis.client import redis_errors

REVOKE = """
-- KEYS[1] the revocations stream
-- ARGV[1] org, ARGV[2] conversation, ARGV[3] revoked at (unix seconds),
-- ARGV[4] its milliseconds, ARGV[5] the oldest milliseconds kept
-- returns the new entry's id
local ms = tonumber(ARGV[4])
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if newest then
  local newest_ms = tonumber(string.match(newest[1], '^(%d+)'))
  if newest_ms > ms then ms = newest_ms end
end
local id = redis.call('XADD', KEYS[1], string.format('%d-*', ms),
  'org', ARGV[1], 'conversation', ARGV[2], 'at', ARGV[3])
redis.call('XTRIM', KEYS[1], 'MINID', ARGV[5])
return id
"""


class RedisRevocations:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._revoke = client.register_script(REVOKE)

    def revoke_egress(self, revocation: EgressRevocation, keep_seconds: float) -> None:
        at = revocation.revoked_at
        with redis_errors():
            self._revoke(
                keys=[keys.EGRESS_REVOCATIONS],
                args=[
                    revocation.org,
                    revocation.conversation,
                    repr(at),
                    int(at * 1000),
                    max(int((at - keep_seconds) * 1000), 0),
                ],
            )

    def egress_revocations(
        self, after: str | None, limit: int
    ) -> tuple[list[EgressRevocation], str | None]:
        with redis_errors():
            raw: Any = self._redis.xrange(
                keys.EGRESS_REVOCATIONS, f"({after}" if after else "-", "+", count=limit
            )
        entries: list[Any] = list(raw)
        found = [
            EgressRevocation(fields["org"], fields["conversation"], float(fields["at"]))
            for _, fields in entries
        ]
        return found, str(entries[-1][0]) if entries else after
