"""What an MCP host shows of a call: a readable text, the JSON result as
structured content, and links to published artifacts.

Failures are tool results with ``isError`` (the model reads them and its turn goes
on), never protocol errors; their structured content is ``{"error": {"code",
"message", ...fields such as "limit" or "approvalId"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mcp_types as types

from runtime.core.errors import SiestaError
from runtime.mcp.caller import FileLink

"""A conversation file's id → the URI a host can fetch it from."""


def success(function: str, result: dict[str, Any], link: FileLink) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(text=summary(function, result))]
    content += artifact_links(result, link)
    return types.CallToolResult(content=content, structured_content=result)


def failure(error: dict[str, Any], details: dict[str, Any] | None = None) -> types.CallToolResult:
    """``error`` is a ``SiestaError.to_dict()``; ``details`` what else the caller
    may read (a failed script's logs)."""
    structured = {**(details or {}), "error": error}
    return types.CallToolResult(
        content=[types.TextContent(text=error_text(error))],
        structured_content=structured,
        is_error=True,
    )


def error_failure(error: SiestaError) -> types.CallToolResult:
    return failure(error.to_dict())


def error_text(error: dict[str, Any]) -> str:
    text = f"{error['code']}: {error['message']}"
    if "approvalId" in error:
        text += (
            f"\napprovalId: {error['approvalId']} (a person decides it with "
            f"POST /v1/tools/approvals/{error['approvalId']})"
        )
    if "limit" in error:
        unit = f" {error['unit']}" if "unit" in error else ""
        text += f"\nlimit in force: {error['limit']}{unit}"
    return text


def artifact_links(result: dict[str, Any], link: FileLink) -> list[types.ContentBlock]:
    """One resource link per artifact ``publishFiles`` made."""
    links: list[types.ContentBlock] = []
    for outcome in result.get("files") or ():
        artifact = outcome.get("artifact") if isinstance(outcome, dict) else None
        if artifact:
            links.append(
                types.ResourceLink(
                    name=artifact["name"],
                    uri=link(artifact["id"]),
                    mime_type=artifact.get("contentType"),
                    size=artifact.get("size"),
                    description=f"artifact published from {outcome['path']}",
                )
            )
    return links


def summary(function: str, result: dict[str, Any]) -> str:
    shape = _SUMMARIES.get(function)
    text = shape(result) if shape else json.dumps(result, ensure_ascii=False)
    if result.get("workspaceReset"):
        why = result.get("workspaceResetReason") or "unknown"
        text = f"note: the workspace was reset ({why}): files and packages are gone\n" + text
    elif result.get("sandboxRecreated"):
        text = "note: the sandbox was made again: files kept, installed packages gone\n" + text
    elif result.get("resumed") == "stopped":
        text = "note: the sandbox had stopped: files and packages kept, processes ended\n" + text
    return text


def _run_command(r: dict[str, Any]) -> str:
    head = f"exit code {r['exitCode']}"
    if r.get("timedOut"):
        head += f" (timed out after {r['timeoutSeconds']} s)"
    lines = [head]
    lines += [f"staged {f['name']} at {f['path']}" for f in r.get("stagedFiles") or ()]
    for stream in ("stdout", "stderr"):
        if r.get(stream):
            cut = " (truncated)" if (r.get("truncated") or {}).get(stream) else ""
            lines.append(f"--- {stream}{cut} ---\n{r[stream].rstrip()}")
    lines += [f"limit reached: {limit['message']}" for limit in r.get("limitsReached") or ()]
    return "\n".join(lines)


def _read_file(r: dict[str, Any]) -> str:
    if r["encoding"] == "base64":
        head = f"{r['path']}: binary, {r['size']} bytes (base64 in structured content)"
        body = ""
    else:
        head = f"{r['path']} ({r['size']} bytes)"
        body = "\n" + r["content"]
    if r.get("nextOffset") is not None:
        head += f"; more follows: read again with offset {r['nextOffset']}"
    return head + body


def _list_files(r: dict[str, Any]) -> str:
    lines = [f"{r['path']}: {r['total']} entries" + (" (cut)" if r.get("truncated") else "")]
    for e in r["entries"]:
        lines.append(f"{e['name']}/" if e["isDirectory"] else f"{e['name']}  {e['size']} bytes")
    return "\n".join(lines)


def _publish_files(r: dict[str, Any]) -> str:
    lines = [f"published {r['published']}, failed {r['failed']}"]
    for outcome in r["files"]:
        if "artifact" in outcome:
            a = outcome["artifact"]
            lines.append(f"{outcome['path']}: {a['name']} ({a['size']} bytes, {a['contentType']})")
        else:
            e = outcome["error"]
            lines.append(f"{outcome['path']}: {e['code']}: {e['message']}")
    return "\n".join(lines)


def _process(r: dict[str, Any]) -> str:
    name = f"process {r['pid']}" + (f" ({r['tag']})" if r.get("tag") else "")
    lines = [f"{name}: running" if r["running"] else f"{name}: ended, {r['status']}"]
    lines += [f"--- {stream} ---\n{text.rstrip()}" for stream, text in r["recent"].items()]
    return "\n".join(lines)


def _js(r: dict[str, Any]) -> str:
    lines = [f"status: {s}" for s in r.get("statuses") or ()]
    lines += [f"log: {entry}" for entry in r.get("logs") or ()]
    if r.get("result") is not None:
        lines.append(f"result: {r['result']}")
    return "\n".join(lines) or "result: undefined"


_SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "runCommand": _run_command,
    "writeFile": lambda r: f"wrote {r['path']} ({r['size']} bytes)",
    "readFile": _read_file,
    "listFiles": _list_files,
    "publishFiles": _publish_files,
    "JsExecutorAgent": _js,
    **dict.fromkeys(["startProcess", "readProcess", "writeProcessInput", "stopProcess"], _process),
}
