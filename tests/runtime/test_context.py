from __future__ import annotations

import pytest

from runtime.core.context import CallContext
from runtime.core.errors import InvalidRequest


@pytest.mark.parametrize("conversation", ["c", "a" * 128, "A-z_0.9:x"])
def test_valid_ids(conversation: str) -> None:
    assert CallContext("org", "user", conversation).key == f"org/{conversation}"


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("conversation", "", "invalid_conversation_id"),
        ("conversation", "a" * 129, "invalid_conversation_id"),
        ("conversation", "../x", "invalid_conversation_id"),
        ("conversation", "a\nb", "invalid_conversation_id"),
        ("org", "o/rg", "invalid_context"),
        ("user", "", "invalid_context"),
    ],
)
def test_invalid_ids(field: str, value: str, code: str) -> None:
    values = {"org": "org", "user": "user", "conversation": "conv", field: value}
    with pytest.raises(InvalidRequest) as caught:
        CallContext(values["org"], values["user"], values["conversation"])
    assert caught.value.code == code
