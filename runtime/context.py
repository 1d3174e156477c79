"""Who is calling, for which conversation: validated once at the edge."""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.errors import InvalidRequest
from runtime.store.records import conversation_key

ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def check_id(value: str, what: str, code: str) -> str:
    # All-dot ids ("." and "..") would mean something else in any path they reach.
    if not ID_PATTERN.fullmatch(value) or not value.strip("."):
        msg = (
            f"{what} must be 1 to 128 characters of A-Z a-z 0-9 . _ : -, "
            f"not only dots (got {value[:140]!r})"
        )
        raise InvalidRequest(msg, code=code)
    return value


@dataclass(frozen=True)
class CallContext:
    """The trusted context the agent backend sends with each call."""

    org: str
    user: str
    conversation: str
    agent: str | None = None
    base_image: str | None = None
    """The agent's catalog image id; used only when a session is provisioned."""

    def __post_init__(self) -> None:
        check_id(self.conversation, "conversation id", "invalid_conversation_id")
        check_id(self.org, "organisation id (X-Siesta-Org)", "invalid_context")
        check_id(self.user, "user id (X-Siesta-User)", "invalid_context")

    @property
    def key(self) -> str:
        """The conversation's key in the store: ``org/conversation``."""
        return conversation_key(self.org, self.conversation)
