"""JsExecutorAgent: run one script for a conversation and shape the result.

A script error is a *result* (the agent sees its logs up to the failure);
only bad requests and an unavailable pool are raised.
"""

from __future__ import annotations

from collections.abc import Callable

from siesta_contract.functions.js import JsError, JsResult
from siesta_contract.text import is_non_blank_text

from runtime.agents import AgentGateway
from runtime.agents.settings import AgentSettings
from runtime.core import tracing
from runtime.core.context import CallContext
from runtime.core.errors import CodeTooLarge, InvalidCode
from runtime.files.conversation import ConversationFiles
from runtime.jsexec.helpers import HelperHost
from runtime.jsexec.pool import WorkerPool
from runtime.jsexec.settings import JsSettings


class JsExecutor:
    def __init__(
        self,
        pool: WorkerPool,
        files: ConversationFiles,
        agents: AgentGateway,
        settings: JsSettings,
        agent_settings: AgentSettings,
    ) -> None:
        self._pool = pool
        self._files = files
        self._agents = agents
        self._settings = settings
        self._agent_settings = agent_settings

    def run(
        self,
        ctx: CallContext,
        code: str,
        timeout_seconds: float | None = None,
        on_status: Callable[[str], None] | None = None,
    ) -> JsResult:
        self._check(code)
        timeout = min(
            timeout_seconds or self._settings.timeout_seconds, self._settings.timeout_seconds
        )
        host = HelperHost(ctx, self._files, self._agents, self._settings, self._agent_settings)
        with tracing.span("js.run", org=ctx.org, conversation=ctx.conversation) as span:
            outcome = self._pool.run(code, host.dispatch, on_status or _ignore, timeout)
            tracing.outcome(span, outcome.error.get("code") if outcome.error else None)
        return JsResult(
            result=outcome.result if outcome.error is None else None,
            error=JsError.model_validate(outcome.error) if outcome.error is not None else None,
            logs=outcome.logs,
            statuses=outcome.statuses,
            truncated=outcome.truncated,
            durationMs=outcome.duration_ms,
        )

    def close(self) -> None:
        self._pool.close()

    def _check(self, code: str) -> None:
        if not is_non_blank_text(code):
            msg = "code is empty (or contains a NUL byte)"
            raise InvalidCode(msg)
        size = len(code.encode("utf-8", errors="surrogatepass"))
        if size > self._settings.max_code_bytes:
            msg = f"code is {size} bytes, over the limit of {self._settings.max_code_bytes} bytes"
            raise CodeTooLarge(msg, limit=self._settings.max_code_bytes, unit="bytes")


def _ignore(_: str) -> None:
    """No one streams this script's statuses."""
