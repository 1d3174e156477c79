"""Wiring: builds the runtime's parts from settings, in one place."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.config import Settings
from runtime.images import ImageCatalog
from runtime.providers import build_provider
from runtime.providers.base import SandboxProvider
from runtime.sandbox import Sandbox
from runtime.sessions import SessionManager
from runtime.store.base import Store
from runtime.store.sqlite import SqliteStore


@dataclass
class Services:
    settings: Settings
    catalog: ImageCatalog
    store: Store
    provider: SandboxProvider
    sessions: SessionManager
    sandbox: Sandbox

    @classmethod
    def build(cls, settings: Settings) -> Services:
        catalog = ImageCatalog.load(settings.images.catalog_path)
        store = SqliteStore(settings.store_path)
        provider = build_provider(settings)
        sessions = SessionManager(store, provider, catalog, settings.sandbox)
        sandbox = Sandbox(sessions, provider, settings.command)
        return cls(settings, catalog, store, provider, sessions, sandbox)

    def close(self) -> None:
        self.sessions.close()
        self.store.close()
        self.provider.close()
