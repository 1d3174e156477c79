"""An org's memory banks, for operators (``client.memory_banks``): agents use them
through the ``memory_banks`` System Tool (``client.tools.execute``)."""

from __future__ import annotations

from siesta_contract.functions.memory import AddedEntry, BankMode, BankType, Speaker
from siesta_contract.memory import MemoryBankPublic, MemoryBanksPublic

from siesta_client import _calls
from siesta_client._ops import AsyncCaller, Caller


class MemoryBanks:
    def __init__(self, client: Caller) -> None:
        self.client = client

    def create(
        self,
        name: str,
        type: BankType,
        *,
        org: str,
        description: str | None = None,
        mode: BankMode | None = None,
    ) -> MemoryBankPublic:
        """A new, empty bank (``mode`` ``read_only``: agents may not write it)."""
        return self.client.call(_calls.create_memory_bank(org, name, type, description, mode))

    def list(self, *, org: str) -> MemoryBanksPublic:
        return self.client.call(_calls.memory_banks(org))

    def get(self, bank_id: str, *, org: str) -> MemoryBankPublic:
        return self.client.call(_calls.memory_bank(org, bank_id))

    def delete(self, bank_id: str, *, org: str) -> None:
        """Remove it and every entry it holds."""
        self.client.call(_calls.delete_memory_bank(org, bank_id))

    def add(
        self, bank_id: str, key: str, content: str, *, org: str, speaker: Speaker | None = None
    ) -> AddedEntry:
        """An entry, whatever the bank's mode (``speaker`` in a conversation bank)."""
        return self.client.call(_calls.add_memory_entry(org, bank_id, key, content, speaker))


class AsyncMemoryBanks:
    def __init__(self, client: AsyncCaller) -> None:
        self.client = client

    async def create(
        self,
        name: str,
        type: BankType,
        *,
        org: str,
        description: str | None = None,
        mode: BankMode | None = None,
    ) -> MemoryBankPublic:
        op = _calls.create_memory_bank(org, name, type, description, mode)
        return await self.client.call(op)

    async def list(self, *, org: str) -> MemoryBanksPublic:
        return await self.client.call(_calls.memory_banks(org))

    async def get(self, bank_id: str, *, org: str) -> MemoryBankPublic:
        return await self.client.call(_calls.memory_bank(org, bank_id))

    async def delete(self, bank_id: str, *, org: str) -> None:
        await self.client.call(_calls.delete_memory_bank(org, bank_id))

    async def add(
        self, bank_id: str, key: str, content: str, *, org: str, speaker: Speaker | None = None
    ) -> AddedEntry:
        op = _calls.add_memory_entry(org, bank_id, key, content, speaker)
        return await self.client.call(op)
