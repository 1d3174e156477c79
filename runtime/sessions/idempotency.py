"""Requests sent with an ``Idempotency-Key``: their claims and kept answers, in the
store so that every instance sharing it sees them (``api/idempotency.py`` is the
middleware that asks). How long a claim holds and an answer is kept are the
settings'; a key named with its conversation goes when the conversation does."""

from __future__ import annotations

from runtime.core.records import IdempotencyClaim, IdempotencyEntry, KeptResponse
from runtime.core.settings import IdempotencySettings
from runtime.seams.stores import IdempotencyStore


class IdempotencyKeys:
    def __init__(self, store: IdempotencyStore, settings: IdempotencySettings) -> None:
        self._store = store
        self.settings = settings

    def claim(
        self, key: str, fingerprint: str, owner: str, conversation: str | None
    ) -> IdempotencyClaim | IdempotencyEntry:
        """``owner``'s claim on ``key`` if nobody holds it; else what the key holds (a
        running claim, a kept answer, or another request's fingerprint)."""
        settings = self.settings
        return self._store.claim_key(
            key,
            fingerprint,
            owner,
            settings.hold_seconds,
            ttl=settings.ttl_seconds,
            conversation=conversation,
        )

    def renew(self, key: str, owner: str) -> bool:
        """Extend ``owner``'s running claim by another hold, if it still has it."""
        return self._store.renew_key(key, owner, self.settings.hold_seconds)

    def complete(self, key: str, owner: str, response: KeptResponse) -> bool:
        """Keep ``response`` as the key's answer, for retries to replay."""
        return self._store.complete_key(key, owner, response, self.settings.ttl_seconds)

    def release(self, key: str, owner: str) -> bool:
        """Let the key go unanswered: a retry runs again."""
        return self._store.release_key(key, owner)
