"""What the sandbox functions share: the conversation's session, the inside of its
sandbox, the conversation's files, and the fields every result carries."""

from __future__ import annotations

from typing import Any

from runtime.files.conversation import ConversationFiles
from runtime.files.settings import FileSettings
from runtime.seams.providers import SandboxProvider
from runtime.sessions.active import ActiveSession
from runtime.sessions.manager import SessionManager


class SandboxParts:
    """The state every group of sandbox functions works with (set by ``Sandbox``)."""

    _sessions: SessionManager
    _provider: SandboxProvider
    """Only its inside: sessions make and resume the sandbox."""
    _files: ConversationFiles
    _limits: FileSettings


def session_fields(session: ActiveSession) -> dict[str, Any]:
    """What every result says about the session it ran in."""
    return {
        "workspaceReset": session.workspace_reset,
        "workspaceResetReason": session.reset_reason.value if session.reset_reason else None,
        "resumed": session.resumed,
        "sandboxRecreated": session.sandbox_recreated,
        "sessionId": session.record.session_id,
    }
