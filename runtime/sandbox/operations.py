"""The agent's five sandbox functions: runCommand, writeFile, readFile, listFiles,
publishFiles (plus staging of conversation files for runCommand).

Results are the function models of ``siesta_contract/functions/sandbox.py``, in the wire
shape (camelCase) the agent backend forwards to the model. Every function checks
its arguments before it touches the conversation's sandbox. Each group lives in a
module of its own (``commands.py``, ``files.py``, ``publishing.py``); ``Sandbox``
puts them together.
"""

from __future__ import annotations

from runtime.egress.service import Egress
from runtime.files.conversation import ConversationFiles
from runtime.files.settings import FileSettings
from runtime.sandbox.commands import CommandFunctions
from runtime.sandbox.files import FileFunctions
from runtime.sandbox.publishing import PublishFunctions
from runtime.sandbox.settings import CommandSettings
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import SandboxProvider
from runtime.seams.stores import IdempotencyStore
from runtime.sessions.manager import SessionManager


class Sandbox(CommandFunctions, FileFunctions, PublishFunctions):
    def __init__(
        self,
        sessions: SessionManager,
        provider: SandboxProvider,
        files: ConversationFiles,
        commands: CommandSettings,
        limits: FileSettings,
        egress: Egress | None = None,
        sandbox_settings: SandboxSettings | None = None,
        disk_limits_mb: tuple[int | None, int | None] = (None, None),
        retries: IdempotencyStore | None = None,
    ) -> None:
        """``disk_limits_mb``: the workspace's and the writable layer's sizes where the
        provider enforces them (``None``: no limit of ours to name when one is full).
        ``retries``: where a command with an ``Idempotency-Key`` records the sandbox it
        is handed to, so a retry after its instance died collects it there."""
        self._retries = retries
        self._egress = egress or Egress()
        self._sandbox_settings = sandbox_settings or SandboxSettings()
        self._disk_limits_mb = disk_limits_mb
        self._sessions = sessions
        self._provider = provider
        self._files = files
        self._commands = commands
        self._limits = limits
