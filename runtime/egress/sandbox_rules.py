"""Each conversation's own network rules, as the proxy reads them, and its count of
refused requests, as the proxy writes it.

Rules are read from the store, not signed into the credentials, because they must
apply to a sandbox that is already running: a process started before they changed
(a server, a package install) holds credentials signed then, and a tightening
must reach it too. A proxy keeps what it read for ``cache_seconds`` (a change
applies within that), so a burst of connections costs one read. When the store
cannot be read, the proxy keeps serving, as it does with revocations: rules it
read stay in force however old (it keeps them an hour after their last use), and
a conversation whose rules it never read gets the deployment's and the agent's
lists alone until the store answers (each such request is reported as
``network_rules_unavailable``). Narrowing is a user's choice within the
deployment's list, which always holds; refusing every sandbox's egress while the
store is down would be the larger harm.

Refusals are tallied in memory and added to the store once a second, so a sandbox
that hammers a refused host costs the store one write per second at most.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.core.network_rules import EgressRefusals, NetworkRules
from runtime.seams.stores import NetworkRuleStore

Emit = Callable[[dict[str, Any]], None]
Key = tuple[str, str]
FLUSH_SECONDS = 1.0
FORGET_UNUSED_SECONDS = 3600.0
"""Rules unused this long leave the proxy's memory (kept meanwhile for an outage)."""


@dataclass
class _Cached:
    rules: NetworkRules | None
    read_at: float
    used_at: float


class SandboxRules:
    def __init__(
        self,
        source: NetworkRuleStore | None,
        *,
        cache_seconds: float,
        emit: Emit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._cache_seconds = cache_seconds
        self._emit = emit
        self._clock = clock
        self._cached: dict[Key, _Cached] = {}
        self._reading: dict[Key, asyncio.Future[NetworkRules | None]] = {}
        """The read in flight per conversation, which a burst of its connections shares."""

    async def get(self, org: str, conversation: str) -> NetworkRules | None:
        """The conversation's rules (``None``: none set, or never read and the store
        cannot be read now)."""
        if self._source is None:
            return None
        key, now = (org, conversation), self._clock()
        cached = self._cached.get(key)
        if cached is not None:
            cached.used_at = now
            if now - cached.read_at < self._cache_seconds:
                return cached.rules
        reading = self._reading.get(key)
        if reading is None:  # the first of a burst reads; the others wait for its answer
            reading = asyncio.ensure_future(self._read(self._source, key))
            self._reading[key] = reading
        # Shielded: a connection that goes away does not cancel the others' read.
        return await asyncio.shield(reading)

    async def _read(self, source: NetworkRuleStore, key: Key) -> NetworkRules | None:
        org, conversation = key
        try:
            rules = await asyncio.to_thread(source.network_rules, org, conversation)
        except Exception as exc:  # whatever the store raises, the proxy goes on
            cached = self._cached.get(key)
            self._emit(
                {
                    "event": "network_rules_unavailable",
                    "org": org,
                    "conversation": conversation,
                    "known": cached is not None,
                    "detail": str(exc),
                }
            )
            return cached.rules if cached is not None else None
        finally:
            del self._reading[key]
        now = self._clock()
        self._cached[key] = _Cached(rules, now, now)
        return rules

    def forget_unused(self) -> None:
        oldest = self._clock() - FORGET_UNUSED_SECONDS
        for key in [key for key, cached in self._cached.items() if cached.used_at < oldest]:
            del self._cached[key]


class RefusalTally:
    def __init__(
        self,
        sink: NetworkRuleStore | None,
        *,
        keep_seconds: float,
        emit: Emit,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sink = sink
        self._keep_seconds = keep_seconds
        self._emit = emit
        self._clock = clock
        self._pending: dict[Key, EgressRefusals] = {}

    def note(self, org: str, conversation: str, host: str, reason: str) -> None:
        if self._sink is None or not conversation:
            return
        key = (org, conversation)
        earlier = self._pending.get(key)
        count = earlier.count + 1 if earlier else 1
        self._pending[key] = EgressRefusals(count, host, reason, self._clock())

    async def flush(self) -> None:
        """Add what was tallied to the store; kept for the next flush if it fails."""
        if self._sink is None or not self._pending:
            return
        pending, self._pending = self._pending, {}
        sink = self._sink
        for (org, conversation), refusals in pending.items():
            try:
                await asyncio.to_thread(
                    sink.add_egress_refusals, org, conversation, refusals, self._keep_seconds
                )
            except Exception as exc:  # counted again at the next flush
                self._emit({"event": "refusals_unrecorded", "detail": str(exc)})
                self._merge_back(org, conversation, refusals)

    def _merge_back(self, org: str, conversation: str, refusals: EgressRefusals) -> None:
        later = self._pending.get((org, conversation))
        if later is None:
            self._pending[(org, conversation)] = refusals
        else:
            count = refusals.count + later.count
            self._pending[(org, conversation)] = EgressRefusals(
                count, later.last_host, later.last_reason, later.last_at
            )


async def keep_up(rules: SandboxRules, tally: RefusalTally) -> None:
    """Until cancelled: refusals flushed, unused rules forgotten."""
    while True:
        await asyncio.sleep(FLUSH_SECONDS)
        await tally.flush()
        rules.forget_unused()
