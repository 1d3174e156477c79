"""Registered agents in Redis: a hash per org (agent id → the record as JSON); a new
agent is counted against the org's limit in the same script that stores it."""

from __future__ import annotations

from typing import Any

import redis

from runtime.core.records import AgentRecord
from runtime.store import keys
from runtime.store.redis.client import redis_errors

PUT_AGENT = """
-- KEYS[1] the org's agents hash; ARGV[1] agent id, ARGV[2] the record, ARGV[3] the limit
-- returns 1 when stored, 0 when the agent is new and the org has the limit's count
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0
   and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


class RedisAgents:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._put = client.register_script(PUT_AGENT)

    def put_agent(self, record: AgentRecord, limit: int) -> bool:
        with redis_errors():
            stored = self._put(
                keys=[keys.agents(record.org)], args=[record.agent_id, record.to_json(), limit]
            )
        return bool(int(stored))

    def get_agent(self, org: str, agent_id: str) -> AgentRecord | None:
        with redis_errors():
            body: Any = self._redis.hget(keys.agents(org), agent_id)
        return AgentRecord.from_json(str(body)) if body is not None else None

    def list_agents(self, org: str) -> list[AgentRecord]:
        with redis_errors():
            bodies: Any = self._redis.hvals(keys.agents(org))
        found = [AgentRecord.from_json(str(body)) for body in bodies]
        return sorted(found, key=lambda a: a.agent_id)

    def delete_agent(self, org: str, agent_id: str) -> bool:
        with redis_errors():
            return bool(self._redis.hdel(keys.agents(org), agent_id))
