"""Conversations' network rules and egress refusal counts (``NetworkRuleStore``), on
SQLite and Redis alike: kept per org and conversation, replaced whole, counts added
up and forgotten with the conversation."""

from __future__ import annotations

import time

from runtime.core.network_rules import EgressRefusals, HeaderSet, NetworkRules, SecretBinding
from runtime.core.records import SealedSecret
from runtime.seams.stores import Stores


def test_rules_are_replaced_whole_and_kept_per_org(store: Stores) -> None:
    network = store.network
    assert network.network_rules("org-a", "c1") is None
    network.set_network_rules("org-a", "c1", NetworkRules(("a.example",), ("b.example",)))
    network.set_network_rules("org-a", "c1", NetworkRules(None, ("c.example",), internet=False))
    assert network.network_rules("org-a", "c1") == NetworkRules(None, ("c.example",), False)
    assert network.network_rules("org-b", "c1") is None
    network.set_network_rules("org-a", "c2", NetworkRules(allow=()))
    assert network.network_rules("org-a", "c2") == NetworkRules(allow=())


def test_refusals_add_up_the_last_one_wins_and_the_conversation_forgets_them(
    store: Stores,
) -> None:
    network, now = store.network, time.time()
    assert network.egress_refusals("org-a", "c1") is None
    network.add_egress_refusals(
        "org-a", "c1", EgressRefusals(3, "a.example", "sandbox_deny", now), 60
    )
    network.add_egress_refusals(
        "org-a", "c1", EgressRefusals(2, "b.example", "internet_off", now + 1), 60
    )
    assert network.egress_refusals("org-a", "c1") == EgressRefusals(
        5, "b.example", "internet_off", now + 1
    )
    assert network.egress_refusals("org-b", "c1") is None
    network.set_network_rules("org-a", "c1", NetworkRules(internet=False))
    network.forget_network("org-a", "c1")
    assert network.egress_refusals("org-a", "c1") is None
    assert network.network_rules("org-a", "c1") is None


def secret(org: str, name: str, sealed: str = "v1.x", at: float = 1.0) -> SealedSecret:
    return SealedSecret(org, name, sealed, at, at, 7, ("api.example.com",), "Authorization")


def test_secrets_are_kept_sealed_per_org_within_a_limit(store: Stores) -> None:
    network = store.network
    assert network.put_secret(secret("org-a", "one"), limit=2)
    assert network.put_secret(secret("org-a", "two"), limit=2)
    assert not network.put_secret(secret("org-a", "three"), limit=2)  # a new name: refused
    # A replacement is not a new name: kept, with when it was first set.
    assert network.put_secret(secret("org-a", "two", sealed="v1.y", at=5.0), limit=2)
    replaced = network.secret("org-a", "two")
    assert replaced is not None
    assert (replaced.sealed, replaced.created_at, replaced.updated_at) == ("v1.y", 1.0, 5.0)
    assert replaced.hosts == ("api.example.com",) and replaced.header == "Authorization"
    assert [s.name for s in network.org_secrets("org-a")] == ["one", "two"]
    assert network.secret("org-b", "one") is None and network.org_secrets("org-b") == []
    assert network.put_secret(secret("org-b", "one"), limit=1)  # another org's own count
    assert network.delete_secret("org-a", "one")
    assert not network.delete_secret("org-a", "one")
    assert [s.name for s in network.org_secrets("org-a")] == ["two"]


def test_rules_keep_the_secrets_offered_and_the_headers_set(store: Stores) -> None:
    rules = NetworkRules(
        secrets=(SecretBinding("gh", "GITHUB_TOKEN"),),
        header_sets=(HeaderSet("api.example.com", "X-Key", "v1.sealed"),),
    )
    store.network.set_network_rules("org-a", "c9", rules)
    assert store.network.network_rules("org-a", "c9") == rules
