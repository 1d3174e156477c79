"""The console's actions into the audit trail: the one place it is called from."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from runtime.services import Services

log = logging.getLogger(__name__)


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
    log.info("console: %s %s %s from %s", actor, action, target, source)
    # Until the audit trail (runtime/admin/audit.py) is merged in, services have none.
    audit = getattr(services, "audit", None)
    if audit is None:
        return
    audit.record(actor, action, target, source=source, via="console", details=details)
