"""The console's actions into the audit trail (``runtime/admin/audit.py``): the one
place the console records from, always ``via="console"``."""

from __future__ import annotations

from collections.abc import Mapping

from runtime.services import Services


def record_action(
    services: Services,
    actor: str,
    action: str,
    target: str,
    *,
    source: str,
    details: Mapping[str, object] | None = None,
) -> None:
    """``actor`` (a token's name) did ``action`` (``sandbox.delete``) to ``target`` from
    the address ``source``, through the console."""
    services.audit.record(actor, action, target, source=source, via="console", details=details)
