"""Registered agents on both backends: per org, replaced in place, a new one counted
against the org's limit as it is stored."""

from __future__ import annotations

from dataclasses import replace

from runtime.core.records import AgentRecord
from runtime.seams.stores import Stores

AGENT = AgentRecord(
    org="org-a",
    agent_id="writer",
    config={"id": "writer", "functionPolicies": {"runCommand": "confirm"}},
    updated_at=100.0,
    updated_by="backend",
)


def test_agents_are_kept_per_org_replaced_in_place_and_limited(store: Stores) -> None:
    analyst = replace(AGENT, agent_id="analyst", config={"id": "analyst"})
    assert store.agents.put_agent(AGENT, limit=2)
    assert store.agents.put_agent(analyst, limit=2)
    assert not store.agents.put_agent(replace(AGENT, agent_id="third"), limit=2)
    changed = replace(AGENT, config={"id": "writer"}, updated_at=200.0)
    assert store.agents.put_agent(changed, limit=2)  # a replacement is not a new one
    assert store.agents.put_agent(replace(AGENT, org="org-b"), limit=1)

    assert store.agents.list_agents("org-a") == [analyst, changed]  # by id
    assert store.agents.get_agent("org-a", "writer") == changed
    assert store.agents.get_agent("org-c", "writer") is None

    assert store.agents.delete_agent("org-a", "writer")
    assert not store.agents.delete_agent("org-a", "writer")
    assert store.agents.get_agent("org-b", "writer") == replace(AGENT, org="org-b")
    assert store.agents.put_agent(replace(AGENT, agent_id="third"), limit=2)
