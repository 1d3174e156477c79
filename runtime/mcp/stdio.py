"""``siesta-runtime mcp``: the MCP server over stdio, for one conversation.

The process is local and trusted like the other CLI commands (it reads the
deployment's settings and data directory itself), so it takes no token; its
calls are logged as requested by ``mcp-stdio`` (``REQUESTED_BY``), which is not a
token's name: a call it holds for approval is decided over HTTP by a token with
the ``approve`` scope. Published artifacts are linked under ``files_url`` (the
HTTP service's address, when there is one) or as ``siesta://`` URIs.
"""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from runtime.core.context import CallContext
from runtime.mcp.caller import McpCaller
from runtime.mcp.server import build_server
from runtime.services import Services

REQUESTED_BY = "mcp-stdio"


def stdio_caller(ctx: CallContext, files_url: str | None) -> McpCaller:
    base = (files_url or "siesta:/").rstrip("/")

    def file_link(file_id: str) -> str:
        return f"{base}/v1/conversations/{ctx.conversation}/files/{file_id}/content"

    return McpCaller(ctx, REQUESTED_BY, file_link)


async def serve_stdio(services: Services, caller: McpCaller) -> None:
    """Serve stdin/stdout until the host closes stdin."""
    server = build_server(services, lambda _: caller)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
