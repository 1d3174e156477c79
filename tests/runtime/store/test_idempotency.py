"""The idempotency-key contract; SQLite and Redis must pass it unchanged."""

from __future__ import annotations

import concurrent.futures

from runtime.store.base import Stores
from runtime.store.records import IdempotencyEntry, KeptResponse
from tests.runtime.store.conftest import Subject

ANSWER = KeptResponse(200, "application/json", b'{"exitCode": 0}')


def test_the_first_claim_wins_and_the_next_sees_it_running(store: Stores) -> None:
    keys = store.idempotency
    assert keys.claim_key("t/o/k", "fp", "first", hold=30) is None
    assert keys.claim_key("t/o/k", "fp", "second", hold=30) == IdempotencyEntry("fp", None)
    assert keys.claim_key("t/o/other", "fp", "second", hold=30) is None


def test_a_completed_key_replays_its_answer(store: Stores) -> None:
    keys = store.idempotency
    keys.claim_key("k", "fp", "first", hold=30)
    assert keys.complete_key("k", "first", ANSWER, ttl=60)
    assert keys.claim_key("k", "fp", "second", hold=30) == IdempotencyEntry("fp", ANSWER)


def test_the_entry_keeps_the_first_fingerprint(store: Stores) -> None:
    keys = store.idempotency
    keys.claim_key("k", "fp", "first", hold=30)
    keys.complete_key("k", "first", ANSWER, ttl=60)
    assert keys.claim_key("k", "another body", "second", hold=30) == IdempotencyEntry("fp", ANSWER)


def test_an_answer_too_large_to_keep_is_remembered_without_body(store: Stores) -> None:
    keys = store.idempotency
    keys.claim_key("k", "fp", "first", hold=30)
    assert keys.complete_key("k", "first", KeptResponse(200, "application/json", None), ttl=60)
    entry = keys.claim_key("k", "fp", "second", hold=30)
    assert entry == IdempotencyEntry("fp", KeptResponse(200, "application/json", None))


def test_binary_bodies_round_trip(store: Stores) -> None:
    keys = store.idempotency
    body = bytes(range(256)) * 4
    keys.claim_key("k", "fp", "first", hold=30)
    keys.complete_key("k", "first", KeptResponse(201, "application/octet-stream", body), ttl=60)
    entry = keys.claim_key("k", "fp", "second", hold=30)
    assert entry is not None and entry.response is not None and entry.response.body == body


def test_only_the_owner_completes_renews_or_releases(store: Stores) -> None:
    keys = store.idempotency
    keys.claim_key("k", "fp", "first", hold=30)
    assert not keys.complete_key("k", "intruder", ANSWER, ttl=60)
    assert not keys.renew_key("k", "intruder", hold=30)
    assert not keys.release_key("k", "intruder")
    assert keys.renew_key("k", "first", hold=30)
    assert keys.complete_key("k", "first", ANSWER, ttl=60)
    assert not keys.complete_key("k", "first", ANSWER, ttl=60)  # once
    assert not keys.release_key("k", "first")  # a kept answer stays


def test_a_released_claim_can_be_claimed_again(store: Stores) -> None:
    keys = store.idempotency
    keys.claim_key("k", "fp", "first", hold=30)
    assert keys.release_key("k", "first")
    assert keys.claim_key("k", "fp", "second", hold=30) is None


def test_a_lapsed_claim_is_free_again(subject: Subject) -> None:
    keys = subject.store.idempotency
    keys.claim_key("k", "fp", "first", hold=0.2)
    subject.advance(0.3)
    assert keys.claim_key("k", "fp", "second", hold=30) is None
    assert not keys.complete_key("k", "first", ANSWER, ttl=60)  # the first lost it


def test_a_kept_answer_expires_after_its_ttl(subject: Subject) -> None:
    keys = subject.store.idempotency
    keys.claim_key("k", "fp", "first", hold=30)
    keys.complete_key("k", "first", ANSWER, ttl=0.2)
    assert keys.claim_key("k", "fp", "second", hold=30) == IdempotencyEntry("fp", ANSWER)
    subject.advance(0.3)
    assert keys.claim_key("k", "fp", "third", hold=30) is None


def test_concurrent_claims_have_one_winner(store: Stores) -> None:
    def claim(owner: int) -> bool:
        return store.idempotency.claim_key("k", "fp", f"o{owner}", hold=30) is None

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        won = list(pool.map(claim, range(16)))
    assert won.count(True) == 1
