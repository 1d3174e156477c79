"""Whom an MCP request serves: what a transport resolves before a tool runs.

Apart from the server (``server.py``) so a transport can check a request without
loading the MCP SDK (``api/mcp.py`` loads it on the first request)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime.core.context import CallContext

FileLink = Callable[[str], str]
"""A published file's id → the link an MCP host shows for it."""


@dataclass(frozen=True)
class McpCaller:
    """Whom an MCP request serves and who asks: what a transport resolves."""

    ctx: CallContext
    requested_by: str
    """The name logged as the requester (the token's name on HTTP)."""
    file_link: FileLink
