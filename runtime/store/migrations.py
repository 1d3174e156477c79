"""What both stores' schema versions share: a store records how many of its ordered
forward migrations have run, and code meeting a store newer than itself refuses it.

A migration is a small function, appended to its backend's list and never changed
once released (a store that ran it will not run it again); its docstring says what
it changes. Both backends run the missing ones at start, under a lock, so that
replicas starting together migrate once.
"""

from __future__ import annotations

from runtime.core.errors import StoreSchemaTooNew
from runtime.core.version import version


def refuse_newer(found: int, known: int, store: str) -> None:
    """Raise ``StoreSchemaTooNew`` if ``store`` records more migrations than ``known``."""
    if found <= known:
        return
    msg = (
        f"{store} has schema version {found}, but this siesta-runtime ({version()}) knows "
        f"schema versions up to {known}: a newer release has migrated it. Run that release "
        "(or a newer one); stores are never migrated backwards"
    )
    raise StoreSchemaTooNew(msg, storeVersion=found, codeVersion=known)
