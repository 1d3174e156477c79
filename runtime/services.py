"""Wiring: builds the runtime's parts from settings, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.config import Settings
from runtime.context import CallContext
from runtime.files import ConversationFiles, LocalBlobStore
from runtime.images import ImageCatalog
from runtime.leases import Leases
from runtime.providers import build_provider
from runtime.providers.base import SandboxProvider
from runtime.quotas import Quotas
from runtime.sandbox import Sandbox
from runtime.sessions import SessionManager
from runtime.store import build_store
from runtime.store.base import Store


@dataclass
class Services:
    settings: Settings
    catalog: ImageCatalog
    store: Store
    provider: SandboxProvider
    sessions: SessionManager
    files: ConversationFiles
    sandbox: Sandbox

    @classmethod
    def build(cls, settings: Settings) -> Services:
        catalog = ImageCatalog.load(settings.images.catalog_path)
        store = build_store(settings)
        provider = build_provider(settings)
        leases = Leases(store, settings.lease)
        quotas = Quotas(store, leases, provider, settings.capacity)
        sessions = SessionManager(store, provider, catalog, settings.sandbox, leases, quotas)
        files = ConversationFiles(
            store, LocalBlobStore(settings.data_dir / "blobs"), settings.files
        )
        sandbox = Sandbox(sessions, provider, files, settings.command, settings.files)
        return cls(settings, catalog, store, provider, sessions, files, sandbox)

    def delete_conversation(self, ctx: CallContext) -> dict[str, Any]:
        """Tear down the conversation's sandbox, then delete its files."""
        record = self.sessions.delete(ctx)
        deleted_files = self.files.delete_all(ctx)
        return {
            "deleted": record is not None or deleted_files > 0,
            "sessionId": record.session_id if record else None,
            "deletedFiles": deleted_files,
        }

    def close(self) -> None:
        self.sessions.close()
        self.store.close()
        self.provider.close()
