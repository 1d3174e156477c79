"""Memory banks over HTTP: operators create an org's banks, agents use them through
the ``memory_banks`` System Tool (``siesta_contract.functions.memory``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from siesta_contract.functions.memory import BankMode, BankType, Speaker
from siesta_contract.text import NON_BLANK_TEXT


class MemoryBankCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128, pattern=NON_BLANK_TEXT)
    """What agents see in list_memory_banks (not unique)."""
    description: str = Field("", max_length=2000)
    """What it holds and when to use it: agents read it to choose a bank."""
    type: BankType
    """``conversation`` (chat turns, with a speaker) or ``general`` (facts)."""
    mode: BankMode = "read_write"
    """``read_only``: agents may search and load it, never write it; entries come
    through ``POST /v1/memory-banks/{id}/entries``."""


class MemoryBankPublic(BaseModel):
    memoryBankId: str
    name: str
    description: str
    type: BankType
    mode: BankMode
    createdAt: float


class MemoryBanksPublic(BaseModel):
    memoryBanks: list[MemoryBankPublic]
    """Oldest first."""


class MemoryEntryCreate(BaseModel):
    """An entry an operator writes (any mode: how a ``read_only`` bank is filled)."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1)
    content: str = Field(pattern=NON_BLANK_TEXT)
    speaker: Speaker | None = None
    """Required in a conversation bank, refused in a general one."""
