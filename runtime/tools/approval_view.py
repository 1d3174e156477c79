"""What a person deciding an approval sees: the held call, complete.

The executions log shows a call's arguments cut (texts at 4,096 characters) and is
no place to decide from: a 64 KiB command or a 1 MiB file would run in full. An
approval shows the arguments that will run, whole (their size stated, and for
``writeFile`` the path, size and head of the content), who asked, when it expires and
which rule asked. Only values under secret-looking keys are masked, and named.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.core.records import ToolExecution
from runtime.tools.executions import REDACTED, SECRET_KEY, redact

HEAD_CHARS = 2000
"""How much of a ``writeFile``'s content the summary shows."""


def approval_view(execution: ToolExecution, *, complete: bool) -> dict[str, Any]:
    """``ApprovalPublic`` of a call waiting for approval; ``complete=False`` (lists)
    cuts long texts as the log does."""
    pending = execution.pending or {}
    arguments: dict[str, Any] = pending.get("arguments") or {}
    function: dict[str, Any] = pending.get("function") or {}
    masked_keys: list[str] = []
    masked = _masked(arguments, "", masked_keys)
    shown = masked if complete else redact(masked)
    view: dict[str, Any] = {
        "approvalId": execution.id,
        "function": execution.function,
        "source": execution.source,
        "conversationId": execution.conversation,
        "agentId": execution.agent_id,
        "userId": execution.user_id,
        "requestedBy": execution.requested_by,
        "requestedAt": execution.created_at,
        "expiresAt": execution.expires_at,
        "policy": "confirm",
        "policyReason": function.get("policy_reason", ""),
        "arguments": shown,
        "argumentsComplete": shown == masked,
        "argumentsBytes": len(json.dumps(arguments, ensure_ascii=False).encode()),
        "maskedKeys": masked_keys,
    }
    content = arguments.get("content")
    if execution.function == "writeFile" and isinstance(content, str):
        view["writeFile"] = {
            "path": arguments.get("path"),
            "sizeBytes": len(content.encode()),
            "head": content[:HEAD_CHARS],
            "headChars": HEAD_CHARS,
        }
    return view


def _masked(value: Any, path: str, masked_keys: list[str]) -> Any:
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if SECRET_KEY.search(str(key)):
                result[key] = REDACTED
                masked_keys.append(where)
            else:
                result[key] = _masked(item, where, masked_keys)
        return result
    if isinstance(value, list):
        return [_masked(item, f"{path}[{i}]", masked_keys) for i, item in enumerate(value)]
    return value
