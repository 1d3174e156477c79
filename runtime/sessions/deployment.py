"""Which deployment this service instance belongs to.

Everything a deployment creates on a sandbox engine carries its id
(``siesta.deployment``), and reconciliation and clean-up select by that id
alone. Instances that share a store are one deployment: the id is set once in
the store (or given as ``SIESTA_DEPLOYMENT_ID``), so two deployments sharing
one engine never reconcile each other's sandboxes.
"""

from __future__ import annotations

import uuid

from runtime.seams.stores import DeploymentStore


def resolve_deployment_id(configured: str | None, store: DeploymentStore) -> str:
    """The configured id (``SIESTA_DEPLOYMENT_ID``), else the one kept in the store
    (made on first use)."""
    if configured:
        return configured
    return store.claim_deployment_id(uuid.uuid4().hex[:12])
