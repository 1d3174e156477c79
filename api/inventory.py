"""Every route of every face, classified once: who may call it and what guards it.

- ``PUBLIC``: no token (probes, the API's own documents, the console's sign-in form
  and its static files).
- ``IDENTITY``: a bearer token; the org and user are the token's (``Caller.org_for``,
  ``Caller.user_for``): reads of the caller's own things, and changes that run no
  code in a sandbox (conversation files, agents, banks, approvals, lifecycle).
- ``OPERATOR``: an ``admin`` token bound to no org: deployment-wide routes.
- ``GRANT``: a credential issued for one sandbox (a port token, an E2B sandbox's
  access token, an E2B API key bound to its org).
- a function's name: an agent function; the route passes the executor's policy check
  and writes the executions log (``ToolExecutor.run_direct`` or ``through_door``).
- ``ANY_FUNCTION``: the function is named by the call (``/v1/tools/execute``, MCP).

``tests/api/test_route_inventory.py`` holds this against the app's real routes, the
E2B Connect methods and the MCP tools: a new route cannot land unclassified.
"""

from __future__ import annotations

from typing import Final

PUBLIC: Final = "public"
IDENTITY: Final = "identity"
OPERATOR: Final = "operator"
GRANT: Final = "grant"
ANY_FUNCTION: Final = "*"

_CONV = "/v1/conversations/{conversation_id}"
_SANDBOX = f"{_CONV}/sandbox"
_PORT = f"{_CONV}/ports/{{port}}/{{path:path}}"

ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/docs/oauth2-redirect"): PUBLIC,
    ("GET", "/redoc"): PUBLIC,
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    ("GET", "/v1/images"): IDENTITY,
    ("POST", "/v1/images/validate"): IDENTITY,
    ("POST", f"{_SANDBOX}/runCommand"): "runCommand",
    ("POST", f"{_SANDBOX}/writeFile"): "writeFile",
    ("POST", f"{_SANDBOX}/readFile"): "readFile",
    ("POST", f"{_SANDBOX}/listFiles"): "listFiles",
    ("POST", f"{_SANDBOX}/publishFiles"): "publishFiles",
    ("POST", f"{_SANDBOX}/processes"): "startProcess",
    ("GET", f"{_SANDBOX}/processes"): IDENTITY,
    ("GET", f"{_SANDBOX}/processes/{{pid}}"): IDENTITY,
    ("POST", f"{_SANDBOX}/processes/{{pid}}/input"): "writeProcessInput",
    ("POST", f"{_SANDBOX}/processes/{{pid}}/signal"): "stopProcess",
    ("POST", f"{_SANDBOX}/fs/stat"): "statPath",
    ("POST", f"{_SANDBOX}/fs/list"): "listDirectory",
    ("POST", f"{_SANDBOX}/fs/mkdir"): "makeDirectory",
    ("POST", f"{_SANDBOX}/fs/move"): "movePath",
    ("POST", f"{_SANDBOX}/fs/remove"): "removePath",
    ("POST", f"{_SANDBOX}/fs/metadata"): "setMetadata",
    ("POST", f"{_SANDBOX}/fs/watchers"): "watchDirectory",
    ("GET", f"{_SANDBOX}/fs/watchers/{{watcher_id}}"): IDENTITY,
    ("DELETE", f"{_SANDBOX}/fs/watchers/{{watcher_id}}"): IDENTITY,
    ("WS", f"{_SANDBOX}/terminal"): "openTerminal",
    ("GET", f"{_SANDBOX}/metrics"): IDENTITY,
    ("POST", f"{_SANDBOX}/pause"): IDENTITY,
    ("POST", f"{_SANDBOX}/resume"): IDENTITY,
    ("GET", f"{_SANDBOX}/network"): IDENTITY,
    ("PUT", f"{_SANDBOX}/network"): "setNetworkRules",
    ("POST", f"{_CONV}/files"): IDENTITY,
    ("GET", f"{_CONV}/files"): IDENTITY,
    ("GET", f"{_CONV}/files/{{file_id}}/content"): IDENTITY,
    ("POST", f"{_CONV}/js"): "JsExecutorAgent",
    ("GET", _SANDBOX): IDENTITY,
    ("DELETE", _CONV): IDENTITY,
    ("GET", "/v1/tools/system"): IDENTITY,
    ("POST", "/v1/tools/catalog"): IDENTITY,
    ("POST", "/v1/tools/execute"): ANY_FUNCTION,
    ("GET", "/v1/tools/executions"): IDENTITY,
    ("GET", "/v1/tools/approvals"): IDENTITY,
    ("GET", "/v1/tools/approvals/{approval_id}"): IDENTITY,
    ("POST", "/v1/tools/approvals/{approval_id}"): IDENTITY,
    ("GET", "/v1/agents"): IDENTITY,
    ("POST", "/v1/agents"): IDENTITY,
    ("GET", "/v1/agents/{agent_id}"): IDENTITY,
    ("DELETE", "/v1/agents/{agent_id}"): IDENTITY,
    ("GET", "/v1/secrets"): IDENTITY,
    ("PUT", "/v1/secrets/{name}"): IDENTITY,
    ("GET", "/v1/secrets/{name}"): IDENTITY,
    ("DELETE", "/v1/secrets/{name}"): IDENTITY,
    ("POST", "/v1/memory-banks"): IDENTITY,
    ("GET", "/v1/memory-banks"): IDENTITY,
    ("GET", "/v1/memory-banks/{bank_id}"): IDENTITY,
    ("DELETE", "/v1/memory-banks/{bank_id}"): IDENTITY,
    ("POST", "/v1/memory-banks/{bank_id}/entries"): IDENTITY,
    ("POST", "/v1/knowledge-bases"): IDENTITY,
    ("GET", "/v1/knowledge-bases"): IDENTITY,
    ("GET", "/v1/knowledge-bases/{base_id}"): IDENTITY,
    ("DELETE", "/v1/knowledge-bases/{base_id}"): IDENTITY,
    ("POST", "/v1/knowledge-bases/{base_id}/documents"): IDENTITY,
    ("GET", "/v1/knowledge-bases/{base_id}/documents"): IDENTITY,
    ("GET", "/v1/knowledge-bases/{base_id}/documents/{version_id}"): IDENTITY,
    ("DELETE", "/v1/knowledge-bases/{base_id}/documents/{version_id}"): IDENTITY,
    ("POST", "/v1/knowledge-bases/{base_id}/search"): IDENTITY,
    ("POST", "/v1/admin/reconcile"): OPERATOR,
    ("GET", "/v1/admin/audit"): OPERATOR,
    ("GET", "/v1/admin/images"): OPERATOR,
    ("POST", "/v1/admin/images"): OPERATOR,
    ("POST", "/v1/admin/image-imports"): OPERATOR,
    ("GET", "/v1/admin/images/{ref}"): OPERATOR,
    ("POST", "/v1/admin/images/{ref}/state"): OPERATOR,
    ("POST", "/v1/admin/images/{ref}/default"): OPERATOR,
    ("POST", "/v1/admin/images/{ref}/builds"): OPERATOR,
    ("GET", "/v1/admin/image-builds/{build_id}"): OPERATOR,
    ("GET", "/v1/admin/image-builds/{build_id}/events"): OPERATOR,
    **{(method, _PORT): GRANT for method in ("GET", "POST", "PUT", "PATCH", "DELETE")},
    ("OPTIONS", _PORT): GRANT,
    ("WS", _PORT): GRANT,
    ("POST", f"{_CONV}/snapshots"): "createSnapshot",
    ("POST", f"{_CONV}/fork"): "forkSandbox",
    ("POST", f"{_CONV}/forks"): "forkSandbox",
    ("GET", "/v1/snapshots"): IDENTITY,
    ("GET", "/v1/snapshots/{snapshot_id}"): IDENTITY,
    ("DELETE", "/v1/snapshots/{snapshot_id}"): IDENTITY,
    ("POST", "/v1/snapshots/{snapshot_id}/conversations"): "startFromSnapshot",
    ("GET", f"{_SANDBOX}/ports/{{port}}"): "openPort",
    ("GET", "/console/static/console.css"): PUBLIC,
    ("GET", "/console/static/build-log.js"): PUBLIC,
    ("GET", "/console/sign-in"): PUBLIC,
    ("POST", "/console/sign-in"): OPERATOR,
    ("POST", "/console/sign-out"): OPERATOR,
    ("GET", "/console"): OPERATOR,
    ("GET", "/console/sandboxes"): OPERATOR,
    ("GET", "/console/sandboxes/{org}/{conversation_id}"): OPERATOR,
    ("GET", "/console/sandboxes/{org}/{conversation_id}/{action}"): OPERATOR,
    ("POST", "/console/sandboxes/{org}/{conversation_id}/{action}"): OPERATOR,
    ("GET", "/console/images"): OPERATOR,
    ("POST", "/console/images"): OPERATOR,
    ("GET", "/console/images/{ref}"): OPERATOR,
    ("GET", "/console/images/{ref}/retire"): OPERATOR,
    ("POST", "/console/images/{ref}/{action}"): OPERATOR,
    ("GET", "/console/knowledge"): OPERATOR,
    ("POST", "/console/knowledge/{org}"): OPERATOR,
    ("GET", "/console/knowledge/{org}/{base_id}"): OPERATOR,
    ("POST", "/console/knowledge/{org}/{base_id}/documents"): OPERATOR,
    ("POST", "/console/knowledge/{org}/{base_id}/documents/{version_id}/remove"): OPERATOR,
    ("POST", "/console/knowledge/{org}/{base_id}/delete"): OPERATOR,
    ("GET", "/console/image-builds/{build_id}"): OPERATOR,
    ("GET", "/console/image-builds/{build_id}/events"): OPERATOR,
    ("GET", "/console/approvals"): OPERATOR,
    ("POST", "/console/approvals/{org}/{approval_id}"): OPERATOR,
    ("GET", "/console/executions"): OPERATOR,
    ("GET", "/console/executions/{org}/{execution_id}"): OPERATOR,
    ("GET", "/console/audit"): OPERATOR,
    ("GET", "/console/settings"): OPERATOR,
    ("MOUNT", "/mcp"): ANY_FUNCTION,
    ("MOUNT", "/e2b"): GRANT,
    # envd's /files for a URL signed with an E2B sandbox's access token: the signature
    # is the grant; the download or upload then passes the door as envd's /files does
    # ("/envd/files" below).
    ("GET", "/files"): GRANT,
    ("POST", "/files"): GRANT,
}
"""The main app's routes (``WS``: a WebSocket route; ``MOUNT``: a face of its own,
classified below)."""

E2B_ROUTES: dict[tuple[str, str], str] = {
    **{
        (method, f"{prefix}{path}"): GRANT
        for method, path in (
            ("POST", "/sandboxes"),
            ("GET", "/sandboxes"),
            ("POST", "/sandboxes/{sandbox_id}/connect"),
        )
        for prefix in ("", "/v2")
    },
    ("GET", "/sandboxes/{sandbox_id}"): GRANT,
    ("GET", "/templates/aliases/{alias}"): GRANT,
    ("DELETE", "/sandboxes/{sandbox_id}"): GRANT,
    ("POST", "/sandboxes/{sandbox_id}/timeout"): GRANT,
    ("PUT", "/sandboxes/{sandbox_id}/network"): "setNetworkRules",
    ("GET", "/sandboxes/metrics"): GRANT,
    ("POST", "/sandboxes/{sandbox_id}/pause"): GRANT,
    ("GET", "/sandboxes/{sandbox_id}/metrics"): GRANT,
    ("POST", "/sandboxes/{sandbox_id}/snapshots"): "createSnapshot",
    ("POST", "/sandboxes/{sandbox_id}/fork"): "forkSandbox",
    ("GET", "/snapshots"): GRANT,
    ("DELETE", "/templates/{template_id}"): GRANT,
    ("GET", "/envd/health"): GRANT,
    ("GET", "/envd/files"): "downloadFile",
    ("POST", "/envd/files"): "uploadFile",
}
"""The E2B control plane (``X-API-Key``: the token's org) and envd's plain HTTP routes
(the sandbox's access token), under ``/e2b``."""

E2B_RPC: dict[str, str] = {
    "process.Process/Start": "startProcess",
    "process.Process/Connect": GRANT,
    "process.Process/List": GRANT,
    "process.Process/SendInput": "writeProcessInput",
    "process.Process/StreamInput": "writeProcessInput",
    "process.Process/SendSignal": "stopProcess",
    "process.Process/Update": GRANT,
    "process.Process/CloseStdin": GRANT,
    "filesystem.Filesystem/Stat": "statPath",
    "filesystem.Filesystem/ListDir": "listDirectory",
    "filesystem.Filesystem/MakeDir": "makeDirectory",
    "filesystem.Filesystem/Move": "movePath",
    "filesystem.Filesystem/Remove": "removePath",
    "filesystem.Filesystem/WatchDir": "watchDirectory",
    "filesystem.Filesystem/CreateWatcher": "watchDirectory",
    "filesystem.Filesystem/GetWatcherEvents": GRANT,
    "filesystem.Filesystem/RemoveWatcher": GRANT,
}
"""envd's Connect methods (the sandbox's access token): reading a process or a watcher
already started, resizing a terminal or closing stdin run nothing new."""
