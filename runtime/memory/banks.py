"""Memory banks: operators make an org's banks, agents write and read their entries.

A bank belongs to its org: another org's id is ``memory_bank_not_found``, as an id
that never existed. Each function is for one type of bank (the reference:
"Use add_chat_turn for conversation banks"); the wrong one is ``invalid_arguments``
naming the right one. A ``read_only`` bank refuses agents' writes
(``memory_bank_read_only``); operators fill it over HTTP. Every limit is a setting
(``SIESTA_MEMORY__*``) and a refusal caused by one names it.

Each entry is embedded once, when it is added, and its vector kept with it, so a
search embeds only its query and compares it with the key's vectors.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

from siesta_contract.functions import memory as wire
from siesta_contract.memory import MemoryBankCreate

from runtime.core.errors import InvalidArguments
from runtime.core.records import MemoryBank, MemoryEntry
from runtime.memory.embedding import Embedder, Model
from runtime.memory.errors import MemoryBankNotFound, MemoryBankReadOnly, MemoryLimitReached
from runtime.memory.lexical import bm25
from runtime.memory.settings import MemorySettings
from runtime.seams.stores import MemoryStore

FUNCTIONS_OF: dict[str, tuple[str, str]] = {
    "general": ("add_memory", "load_memory"),
    "conversation": ("add_chat_turn", "load_chat_history"),
}
"""Per type of bank, the functions that write and load it."""
SETTING = "SIESTA_MEMORY__"


class MemoryBanks:
    def __init__(
        self,
        store: MemoryStore,
        settings: MemorySettings,
        embedder: Embedder | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._settings = settings
        self._embedder = embedder if settings.embedding == "wordllama" else None
        self._clock = clock

    # The operators' side (HTTP).

    def create(self, org: str, body: MemoryBankCreate) -> MemoryBank:
        bank = MemoryBank(
            org=org,
            bank_id="mem" + secrets.token_hex(8),
            name=body.name,
            description=body.description,
            type=body.type,
            mode=body.mode,
            created_at=self._clock(),
        )
        limit = self._settings.max_banks_per_org
        if not self._store.add_bank(bank, limit):
            msg = f"the org has {limit} memory banks, its most ({SETTING}MAX_BANKS_PER_ORG)"
            raise MemoryLimitReached(msg, limit=limit, scope="org")
        return bank

    def list(self, org: str) -> list[MemoryBank]:
        return self._store.list_banks(org)

    def get(self, org: str, bank_id: str) -> MemoryBank:
        bank = self._store.get_bank(org, bank_id)
        if bank is None:
            raise _not_found(bank_id)
        return bank

    def delete(self, org: str, bank_id: str) -> None:
        if not self._store.delete_bank(org, bank_id):
            raise _not_found(bank_id)

    # Both sides: ``function`` is the agent function calling (``None``: an operator).

    def add(
        self,
        org: str,
        bank_id: str,
        key: str,
        content: str,
        speaker: str | None,
        function: str | None = None,
    ) -> wire.AddedEntry:
        bank = self.get(org, bank_id)
        if function is not None:
            _check_type(bank, function, writes=True)
            if bank.mode == "read_only":
                msg = f"memory bank {bank_id} is read_only: agents may search and load it"
                raise MemoryBankReadOnly(msg, memoryBankId=bank_id)
        elif (speaker is None) != (bank.type == "general"):
            msg = "a conversation bank's entry needs a speaker; a general bank's has none"
            raise InvalidArguments(msg, memoryBankId=bank_id, type=bank.type)
        self._check_length("key", key, self._settings.max_key_chars)
        self._check_length("content", content, self._settings.max_content_chars)
        model = self._model()
        entry = MemoryEntry(
            org=org,
            bank_id=bank_id,
            key=key,
            entry_id=secrets.token_hex(8),
            content=content,
            speaker=speaker,
            created_at=self._clock(),
            embedding=model.name if model else "",
            vector=model.embed([content])[0] if model else b"",
        )
        limit = self._settings.max_entries_per_key
        count = self._store.add_entry(entry, limit)
        if count is None:  # deleted since we read it
            raise _not_found(bank_id)
        if count == 0:
            msg = f"key {key!r} holds {limit} entries, its most ({SETTING}MAX_ENTRIES_PER_KEY)"
            raise MemoryLimitReached(msg, limit=limit, scope="key", key=key)
        return wire.AddedEntry(
            memoryBankId=bank_id, entry=_public(entry), entries=count, limitEntries=limit
        )

    def load(
        self, org: str, bank_id: str, key: str, order: wire.Order, limit: int, function: str
    ) -> wire.LoadedEntries:
        _check_type(self.get(org, bank_id), function, writes=False)
        newest_first = order == "newest_first"
        found, total = self._store.entries(
            org, bank_id, key, newest_first=newest_first, limit=limit
        )
        return wire.LoadedEntries(
            memoryBankId=bank_id,
            key=key,
            order=order,
            entries=[_public(entry) for entry in found],
            total=total,
            limit=limit,
        )

    def search(
        self, org: str, bank_id: str, key: str, query: str, top_n: int
    ) -> wire.SearchResults:
        self.get(org, bank_id)
        self._check_length("query", query, self._settings.max_query_chars)
        found, _ = self._store.entries(
            org, bank_id, key, newest_first=True, limit=self._settings.max_entries_per_key
        )
        model = self._model()
        if model is not None:
            scores = model.similarities(query, _vectors(model, found))
            kept = list(zip(found, scores, strict=True))
        else:
            scores = bm25(query, [entry.content for entry in found])
            kept = [(entry, score) for entry, score in zip(found, scores, strict=True) if score]
        # Stable sort of newest-first entries: of equal scores, the newer comes first.
        best = sorted(kept, key=lambda pair: -pair[1])[:top_n]
        failure = self._embedder.failure if self._embedder else None
        return wire.SearchResults(
            memoryBankId=bank_id,
            key=key,
            results=[
                wire.ScoredEntry(**_public(entry).model_dump(), score=round(score, 4))
                for entry, score in best
            ],
            method="semantic" if model else "lexical",
            searched=len(found),
            note=f"ranked by shared words: {failure}" if failure else None,
        )

    def _model(self) -> Model | None:
        return self._embedder.model() if self._embedder else None

    @staticmethod
    def _check_length(name: str, value: str, limit: int) -> None:
        if len(value) > limit:
            setting = f"{SETTING}MAX_{name.upper()}_CHARS"
            msg = f"{name} has {len(value)} characters; the most is {limit} ({setting})"
            raise InvalidArguments(msg, limit=limit, unit="chars", field=name)


def bank_info(bank: MemoryBank) -> wire.MemoryBankInfo:
    return wire.MemoryBankInfo.model_validate(
        {
            "memoryBankId": bank.bank_id,
            "name": bank.name,
            "description": bank.description,
            "type": bank.type,
            "mode": bank.mode,
        }
    )


def _check_type(bank: MemoryBank, function: str, *, writes: bool) -> None:
    """``function`` fits the bank's type, else name the one that does."""
    if function in FUNCTIONS_OF[bank.type]:
        return
    other = next(t for t in FUNCTIONS_OF if t != bank.type)
    instead = FUNCTIONS_OF[bank.type][0 if writes else 1]
    msg = (
        f"{function} is for {other} banks; memory bank {bank.bank_id} is a "
        f"{bank.type} bank: use {instead}"
    )
    raise InvalidArguments(msg, memoryBankId=bank.bank_id, type=bank.type, use=instead)


def _vectors(model: Model, entries: list[MemoryEntry]) -> list[bytes]:
    """The entries' vectors by ``model``: those kept, the others (written without a
    model or by another one) embedded now."""
    stale = [i for i, entry in enumerate(entries) if entry.embedding != model.name]
    if not stale:
        return [entry.vector for entry in entries]
    fresh = dict(zip(stale, model.embed([entries[i].content for i in stale]), strict=True))
    return [fresh.get(i, entry.vector) for i, entry in enumerate(entries)]


def _public(entry: MemoryEntry) -> wire.MemoryEntry:
    return wire.MemoryEntry.model_validate(
        {
            "entryId": entry.entry_id,
            "key": entry.key,
            "content": entry.content,
            "speaker": entry.speaker,
            "createdAt": entry.created_at,
        }
    )


def _not_found(bank_id: str) -> MemoryBankNotFound:
    msg = f"no memory bank {bank_id} in this org"
    return MemoryBankNotFound(msg, memoryBankId=bank_id)
