"""The idempotency-key contract; SQLite and Redis must pass it unchanged."""

from __future__ import annotations

import concurrent.futures

from runtime.core.records import IdempotencyClaim, IdempotencyEntry, KeptResponse
from runtime.seams.stores import IdempotencyStore, Stores
from tests.runtime.store.conftest import Subject

ANSWER = KeptResponse(200, "application/json", b'{"exitCode": 0}')
TTL = 3600


def claim(
    keys: IdempotencyStore,
    key: str,
    owner: str,
    *,
    fingerprint: str = "fp",
    hold: float = 30,
    conversation: str | None = None,
) -> IdempotencyClaim | IdempotencyEntry:
    return keys.claim_key(key, fingerprint, owner, hold, ttl=TTL, conversation=conversation)


def test_the_first_claim_wins_and_the_next_sees_it_running(store: Stores) -> None:
    keys = store.idempotency
    assert claim(keys, "t/o/k", "first") == IdempotencyClaim(1)
    assert claim(keys, "t/o/k", "second") == IdempotencyEntry("fp", None)
    assert claim(keys, "t/o/other", "second") == IdempotencyClaim(1)


def test_a_completed_key_replays_its_answer(store: Stores) -> None:
    keys = store.idempotency
    claim(keys, "k", "first")
    assert keys.complete_key("k", "first", ANSWER, ttl=60)
    assert claim(keys, "k", "second") == IdempotencyEntry("fp", ANSWER)


def test_the_entry_keeps_the_first_fingerprint(store: Stores) -> None:
    keys = store.idempotency
    claim(keys, "k", "first")
    keys.complete_key("k", "first", ANSWER, ttl=60)
    assert claim(keys, "k", "second", fingerprint="another") == IdempotencyEntry("fp", ANSWER)


def test_an_answer_too_large_to_keep_is_remembered_without_body(store: Stores) -> None:
    keys = store.idempotency
    claim(keys, "k", "first")
    assert keys.complete_key("k", "first", KeptResponse(200, "application/json", None), ttl=60)
    entry = claim(keys, "k", "second")
    assert entry == IdempotencyEntry("fp", KeptResponse(200, "application/json", None))


def test_binary_bodies_round_trip(store: Stores) -> None:
    keys = store.idempotency
    body = bytes(range(256)) * 4
    claim(keys, "k", "first")
    keys.complete_key("k", "first", KeptResponse(201, "application/octet-stream", body), ttl=60)
    entry = claim(keys, "k", "second")
    assert isinstance(entry, IdempotencyEntry)
    assert entry.response is not None and entry.response.body == body


def test_only_the_owner_completes_renews_marks_or_releases(store: Stores) -> None:
    keys = store.idempotency
    claim(keys, "k", "first")
    assert not keys.complete_key("k", "intruder", ANSWER, ttl=60)
    assert not keys.renew_key("k", "intruder", hold=30)
    assert not keys.mark_dispatched("k", "intruder", "sandbox-1")
    assert not keys.release_key("k", "intruder")
    assert keys.renew_key("k", "first", hold=30)
    assert keys.mark_dispatched("k", "first", "sandbox-1")
    assert keys.complete_key("k", "first", ANSWER, ttl=60)
    assert not keys.complete_key("k", "first", ANSWER, ttl=60)  # once
    assert not keys.release_key("k", "first")  # a kept answer stays
    assert not keys.mark_dispatched("k", "first", "sandbox-2")


def test_a_released_claim_that_handed_nothing_over_starts_again(store: Stores) -> None:
    keys = store.idempotency
    claim(keys, "k", "first")
    assert keys.release_key("k", "first")
    assert claim(keys, "k", "second") == IdempotencyClaim(1)


def test_a_released_claim_that_handed_work_over_is_taken_over_at_once(store: Stores) -> None:
    keys = store.idempotency
    claim(keys, "k", "first")
    keys.mark_dispatched("k", "first", "sandbox-1")
    assert keys.release_key("k", "first")
    assert claim(keys, "k", "second") == IdempotencyClaim(2, "sandbox-1")
    assert claim(keys, "k", "third") == IdempotencyEntry("fp", None)  # held by the second


def test_a_lapsed_claim_is_taken_over_with_what_it_handed_over(subject: Subject) -> None:
    keys = subject.store.idempotency
    claim(keys, "k", "first", hold=0.2)
    keys.mark_dispatched("k", "first", "sandbox-1")
    subject.advance(0.3)
    assert claim(keys, "k", "second") == IdempotencyClaim(2, "sandbox-1")
    assert not keys.complete_key("k", "first", ANSWER, ttl=60)  # the first lost it
    assert not keys.renew_key("k", "first", hold=30)
    assert keys.complete_key("k", "second", ANSWER, ttl=60)


def test_a_lapsed_claim_is_not_taken_over_by_another_request(subject: Subject) -> None:
    keys = subject.store.idempotency
    claim(keys, "k", "first", hold=0.2)
    subject.advance(0.3)
    assert claim(keys, "k", "second", fingerprint="other") == IdempotencyEntry("fp", None)


def test_a_kept_answer_expires_after_its_ttl(subject: Subject) -> None:
    keys = subject.store.idempotency
    claim(keys, "k", "first")
    keys.complete_key("k", "first", ANSWER, ttl=0.2)
    assert claim(keys, "k", "second") == IdempotencyEntry("fp", ANSWER)
    subject.advance(0.3)
    assert claim(keys, "k", "third") == IdempotencyClaim(1)


def test_concurrent_claims_have_one_winner(store: Stores) -> None:
    def won(owner: int) -> bool:
        return isinstance(claim(store.idempotency, "k", f"o{owner}"), IdempotencyClaim)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(won, range(16)))
    assert results.count(True) == 1


def test_deleting_a_conversation_forgets_its_keys_only(store: Stores) -> None:
    keys = store.idempotency
    claim(keys, "a1", "o", conversation="org/a")
    keys.complete_key("a1", "o", ANSWER, ttl=60)
    claim(keys, "a2", "o", conversation="org/a")  # still running
    claim(keys, "b1", "o", conversation="org/b")
    claim(keys, "none", "o")

    assert keys.forget_conversation("org/a") == 2

    assert claim(keys, "a1", "p") == IdempotencyClaim(1)
    assert claim(keys, "a2", "p") == IdempotencyClaim(1)
    assert claim(keys, "b1", "p") == IdempotencyEntry("fp", None)
    assert claim(keys, "none", "p") == IdempotencyEntry("fp", None)
