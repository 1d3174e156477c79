"""The agent functions as an MCP server (the official ``mcp`` SDK).

``server.py`` builds the server: the five sandbox functions and the JavaScript
executor as MCP tools, each call through ``ToolExecutor.run_direct`` like a
direct HTTP route (same policies, leases, limits and executions log).
``results.py`` shapes what an MCP host shows; ``resources.py`` offers the
conversation's files as resources. The transports are thin: streamable
HTTP under ``/mcp`` (``api/mcp.py``) and stdio (``siesta-runtime mcp``,
``stdio.py``); each says which conversation a session serves and who asks.
"""
