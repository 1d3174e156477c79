"""Recording an operator's action made through the HTTP API in the audit trail."""

from __future__ import annotations

from fastapi import Request

from runtime.admin.images import Actor
from runtime.core.auth import Caller
from runtime.services import Services


def api_actor(caller: Caller, request: Request) -> Actor:
    """Who asked (the token's name) and from where (the client's address)."""
    return Actor(caller.name, request.client.host if request.client else "", "api")


def record(
    services: Services,
    caller: Caller,
    request: Request,
    action: str,
    target: str,
    **details: object,
) -> None:
    who = api_actor(caller, request)
    services.audit.record(who.name, action, target, source=who.source, via=who.via, details=details)
