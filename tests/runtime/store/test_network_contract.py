"""Conversations' network rules and egress refusal counts (``NetworkRuleStore``), on
SQLite and Redis alike: kept per org and conversation, replaced whole, counts added
up and forgotten with the conversation."""

from __future__ import annotations

import time

from runtime.core.network_rules import EgressRefusals, NetworkRules
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
