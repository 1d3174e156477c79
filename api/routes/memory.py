"""An org's memory banks (``X-Siesta-Org``), which agents use through the
``memory_banks`` System Tool. Operators make, fill and delete them (the ``admin``
scope: a bank and its mode are the org's configuration, like its policies); whoever
runs tools may list them (``tools``). Another org's banks answer 404
``memory_bank_not_found``, as if they did not exist.
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Request, Response

from siesta_contract.functions.memory import AddedEntry
from siesta_contract.memory import (
    MemoryBankCreate,
    MemoryBankPublic,
    MemoryBanksPublic,
    MemoryEntryCreate,
)

from api import audit
from api.deps import CallerDep, OrgDep, ServicesDep, requires
from api.responses import COMMON, error_responses
from runtime.core.records import MemoryBank
from runtime.memory.banks import bank_info

router = APIRouter(
    prefix="/v1/memory-banks", tags=["memory"], responses=error_responses(*COMMON, 404, 409)
)


@router.post("", status_code=201, dependencies=requires("admin"))
async def create_bank(
    body: MemoryBankCreate,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    org: OrgDep,
) -> MemoryBankPublic:
    """A new, empty bank of the org. 409 ``memory_limit_reached`` at the org's limit
    (``SIESTA_MEMORY__MAX_BANKS_PER_ORG``)."""
    bank = await to_thread.run_sync(lambda: services.memory.create(org, body))
    target = f"{org}/{bank.bank_id}"
    await to_thread.run_sync(
        lambda: audit.record(services, caller, request, "memory_bank.create", target)
    )
    return public(bank)


@router.get("", dependencies=requires("tools"))
async def list_banks(services: ServicesDep, org: OrgDep) -> MemoryBanksPublic:
    """The org's banks, oldest first."""
    found = await to_thread.run_sync(lambda: services.memory.list(org))
    return MemoryBanksPublic(memoryBanks=[public(bank) for bank in found])


@router.get("/{bank_id}", dependencies=requires("tools"))
async def get_bank(bank_id: str, services: ServicesDep, org: OrgDep) -> MemoryBankPublic:
    return public(await to_thread.run_sync(lambda: services.memory.get(org, bank_id)))


@router.delete("/{bank_id}", status_code=204, dependencies=requires("admin"))
async def delete_bank(
    bank_id: str,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    org: OrgDep,
) -> Response:
    """The bank and every entry it holds."""

    def delete() -> None:
        services.memory.delete(org, bank_id)
        audit.record(services, caller, request, "memory_bank.delete", f"{org}/{bank_id}")

    await to_thread.run_sync(delete)
    return Response(status_code=204)


@router.post("/{bank_id}/entries", status_code=201, dependencies=requires("admin"))
async def add_entry(
    bank_id: str,
    body: MemoryEntryCreate,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    org: OrgDep,
) -> AddedEntry:
    """An entry written by an operator, whatever the bank's mode (how a ``read_only``
    bank is filled): ``speaker`` in a conversation bank, none in a general one. 409
    ``memory_limit_reached`` when the key holds ``SIESTA_MEMORY__MAX_ENTRIES_PER_KEY``."""

    def add() -> AddedEntry:
        added = services.memory.add(org, bank_id, body.key, body.content, body.speaker)
        # The action, never the entry: its key and content are the org's data.
        audit.record(services, caller, request, "memory_bank.add_entry", f"{org}/{bank_id}")
        return added

    return await to_thread.run_sync(add)


def public(bank: MemoryBank) -> MemoryBankPublic:
    return MemoryBankPublic(**bank_info(bank).model_dump(), createdAt=bank.created_at)
