"""Refusals of memory bank calls (each limit's refusal names the limit)."""

from __future__ import annotations

from runtime.core.errors import Forbidden, NotFound, SiestaError


class MemoryBankNotFound(NotFound):
    """No such bank in the caller's org (another org's banks are never found)."""

    code = "memory_bank_not_found"


class MemoryBankReadOnly(Forbidden):
    """An agent wrote to a ``read_only`` bank."""

    code = "memory_bank_read_only"


class MemoryLimitReached(SiestaError):
    """The org has its most banks, or the key its most entries (``limit``, ``scope``)."""

    code = "memory_limit_reached"
