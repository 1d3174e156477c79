"""Who is calling, for which conversation: validated once at the edge."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from siesta_contract.agents import AgentConfig
from siesta_contract.text import ID_MAX_CHARS, ID_PATTERN

from runtime.core.errors import InvalidContext, InvalidConversationId, InvalidRequest
from runtime.core.network_rules import Allowlist
from runtime.core.records import conversation_key

_ID = re.compile(ID_PATTERN)


def check_id(value: str, what: str, error: type[InvalidRequest]) -> str:
    if len(value) > ID_MAX_CHARS or not _ID.fullmatch(value):
        msg = (
            f"{what} must be 1 to 128 characters of A-Z a-z 0-9 . _ : -, "
            f"not only dots (got {value[:140]!r})"
        )
        raise error(msg)
    return value


def check_egress_allow(entries: tuple[str, ...]) -> None:
    try:
        Allowlist.parse(entries)
    except ValueError as exc:
        msg = f"egress allowlist of the agent: {exc}"
        raise InvalidContext(msg) from exc


@dataclass(frozen=True)
class RetryKey:
    """The ``Idempotency-Key`` a call came with, as its run needs it: a call is run at
    most once per key, even when the instance that first ran it died."""

    key: str
    """The key as the store scopes it (token, org, key)."""
    owner: str
    """The claim this run holds on it."""
    attempt: int = 1
    """More than 1: this run takes over from one that did not finish."""
    dispatched: str | None = None
    """Where an earlier attempt handed the work over (a sandbox id), if it did."""

    @property
    def request_id(self) -> int:
        """The sandbox agent's id for the run, the same for every attempt, so that a
        retry finds the first run (still running, or its kept result) by it."""
        digest = hashlib.sha256(self.key.encode()).digest()
        return int.from_bytes(digest[:8], "big") & (2**63 - 1) or 1


@dataclass(frozen=True)
class CallContext:
    """The trusted context the agent backend sends with each call."""

    org: str
    user: str
    conversation: str
    agent: str | None = None
    base_image: str | None = None
    """The agent's catalog image id; used only when a session is provisioned."""
    egress_allow: tuple[str, ...] | None = None
    """The agent's narrowing of the deployment's egress allowlist (``None``: none)."""
    sub_agents: tuple[str, ...] = ()
    """The agent's configured sub-agents: the only ones ``callAgent``,
    ``callAgentsParallel`` and ``run_function_batch`` may call."""
    approval: str | None = None
    """The approval a held call runs under, once approved: it runs only while that
    approval stands (a deletion of the conversation cancels it, even after approval)."""
    retry: RetryKey | None = None
    """The call's ``Idempotency-Key`` (``None``: it came without one)."""
    message: str | None = None
    """The assistant message the call belongs to (the agent backend's id): artifacts the
    call makes are attached to it. The backend says it, never the model."""
    agent_config: AgentConfig | None = field(default=None, compare=False, repr=False)
    """The registered configuration of ``agent`` (``runtime/tools/agent_registry.py``),
    when it is registered: its policies and System Tools bind the call."""

    def __post_init__(self) -> None:
        check_id(self.conversation, "conversation id", InvalidConversationId)
        check_id(self.org, "organisation id (X-Siesta-Org)", InvalidContext)
        check_id(self.user, "user id (X-Siesta-User)", InvalidContext)
        if self.message is not None:
            check_id(self.message, "assistant message id (X-Siesta-Message-Id)", InvalidContext)
        if self.egress_allow is not None:
            check_egress_allow(self.egress_allow)

    @property
    def key(self) -> str:
        """The conversation's key in the store: ``org/conversation``."""
        return conversation_key(self.org, self.conversation)
