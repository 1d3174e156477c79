"""The composition root: the backends chosen by the settings, opened, and the
runtime's parts built over them.

The one module of ``runtime`` that imports the store and provider implementations
(``runtime.store``, ``runtime.providers``) and egress's Docker side; the entry points
(``cli``, the tests) call ``build_services`` and hand it to the HTTP app, which never
imports this module (the import-linter contract on ``api``).
"""

from __future__ import annotations

import httpx

from runtime.egress.build import build_egress, store_url
from runtime.egress.service import EgressSetup
from runtime.providers import build_provider
from runtime.services import Backends, Services
from runtime.sessions.deployment import resolve_deployment_id
from runtime.settings import Settings
from runtime.store import open_stores


def build_services(
    settings: Settings,
    transport: httpx.BaseTransport | None = None,
    *,
    serving: bool = True,
) -> Services:
    """Everything, from settings; ``transport`` carries every upstream HTTP call
    (tests may pass their own). ``serving=False`` (one-shot commands) starts no
    egress proxy."""
    return Services.build(settings, open_backends(settings, serving=serving), transport)


def open_backends(settings: Settings, *, serving: bool = True) -> Backends:
    """The store, the deployment's id, egress and the provider (whose sandboxes join
    egress's network)."""
    stores = open_stores(settings.store, settings.sqlite_path)
    deployment_id = resolve_deployment_id(settings.deployment_id, stores.deployment)
    egress = build_egress(
        egress_setup(settings), stores.deployment, deployment_id, start_proxy=serving
    )
    provider = build_provider(
        settings.provider,
        settings.sandbox,
        deployment_id=deployment_id,
        data_dir=settings.data_dir,
        resume_timeout_seconds=settings.lifecycle.resume_timeout_seconds,
        network=egress.network,
        trust_pem=egress.trust_pem(),
    )
    return Backends(stores, deployment_id, egress, provider)


def egress_setup(settings: Settings) -> EgressSetup:
    """What egress needs of the whole settings."""
    return EgressSetup(
        settings.egress,
        settings.provider,
        settings.sandbox.extra_labels,
        store_url(settings.store, settings.sqlite_path),
        settings.data_dir,
    )
