"""A JS worker process: V8 (STPyV8) loaded, the helper prelude compiled, one script.

    python -m runtime.jsexec.worker IN_FD OUT_FD

(or forked from the template process, ``zygote.py``, which has V8 loaded
already). Started ahead of time by the pool, it reports ``ready``, runs exactly one
script and exits: V8 cannot be interrupted safely from another thread, so the
service kills the whole process on a timeout or memory breach instead, and a
fresh process means no state leaks from one script into the next.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from runtime.core.errors import JS_ASYNC_NOT_SUPPORTED, JS_ERROR, JS_SYNTAX_ERROR
from runtime.jsexec.protocol import receive, send
from runtime.jsexec.syntax import find_async
from runtime.jsexec.v8 import STPyV8

PRELUDE = r"""
var __logState = {kept: 0, dropped: 0, max: 0};
var __Promise = Promise;
function __isThenable(value) {
  if (value instanceof __Promise) return true;
  if (value === null || (typeof value !== "object" && typeof value !== "function")) return false;
  try { return typeof value.then === "function"; } catch (e) { return false; }
}
function __text(value) {
  if (typeof value === "string") return value;
  if (value === undefined) return "undefined";
  try { var text = JSON.stringify(value); return text === undefined ? String(value) : text; }
  catch (e) { return String(value); }
}
function __call(helper, args) {
  var reply = JSON.parse(siestaHost.call(helper, JSON.stringify(args)));
  if (reply.ok) return reply.value;
  var error = new Error(reply.error);
  if (reply.code) error.code = reply.code;
  throw error;
}
function __run(source, maxLogs, maxChars) {
  __logState.max = maxLogs;
  try {
    var value = (0, eval)(source);
    if (__isThenable(value)) return JSON.stringify({promise: true, dropped: __logState.dropped});
    var text = __text(value);
    // Cut here, before the text is copied into the reply: a 100 MB result stays one copy.
    return JSON.stringify({result: text.length > maxChars ? text.slice(0, maxChars) : text,
                           resultChars: text.length, dropped: __logState.dropped});
  }
  catch (e) {
    var isError = e instanceof Error;
    return JSON.stringify({dropped: __logState.dropped, error: {
      name: isError ? e.name : "Error",
      message: isError ? String(e.message) : "uncaught " + __text(e),
      code: isError && typeof e.code === "string" ? e.code : null,
      stack: isError && e.stack ? String(e.stack) : null}});
  }
}
function log(message) {
  if (__logState.kept < __logState.max) { __logState.kept++; siestaHost.log(__text(message)); }
  else { __logState.dropped++; }
}
function logStatus(message) { siestaHost.status(__text(message)); }
function callAgent(name, prompt) { return __call("callAgent", [name, prompt]); }
function callAgentsParallel(names, prompts) {
  return __call("callAgentsParallel", [names, prompts]);
}
function readExcelFile(fileName, sheetName, maxRows) {
  return __call("readExcelFile", [fileName, sheetName, maxRows === undefined ? null : maxRows]);
}
function listExcelSheets(fileName) { return __call("listExcelSheets", [fileName]); }
function writeExcelFile(fileName, sheetName, rows) {
  return __call("writeExcelFile", [fileName, sheetName, rows]);
}
function createExcelDocument(fileName, sheetName, rows) {
  return __call("createExcelDocument", [fileName, sheetName, rows]);
}
function searchExcelRows(fileName, sheetName, columnName, searchValue, options) {
  return __call("searchExcelRows", [fileName, sheetName, columnName, searchValue,
                                    options === undefined ? null : options]);
}
function getExcelColumnStats(fileName, sheetName, columnName) {
  return __call("getExcelColumnStats", [fileName, sheetName, columnName]);
}
function copyFileAsArtifact(sourceFileName, newFileName) {
  return __call("copyFileAsArtifact", [sourceFileName, newFileName]);
}
function editArtifactFile(fileId, content) { return __call("editArtifactFile", [fileId, content]); }
"""

_POSITION = re.compile(r"@ (\d+) : (\d+) \)")
_EVAL_FRAME = re.compile(r"\(?eval at __run \([^)]*\), <anonymous>:(\d+):(\d+)\)?")


class Host(STPyV8.JSClass):  # type: ignore[misc]  # STPyV8 ships no type information
    """What the prelude calls: each helper is a blocking round trip to the service."""

    def __init__(self, to_service: int, from_service: int, max_log_bytes: int) -> None:
        self._out = to_service
        self._in = from_service
        self._max_log_bytes = max_log_bytes

    def log(self, text: str) -> None:
        send(self._out, {"type": "log", "message": _cut(text, self._max_log_bytes)})

    def status(self, text: str) -> None:
        send(self._out, {"type": "status", "message": _cut(text, self._max_log_bytes)})

    def call(self, helper: str, args_json: str) -> str:
        send(self._out, {"type": "call", "helper": helper, "args": json.loads(args_json)})
        reply = receive(self._in)
        if reply is None:  # the service went away: nothing sensible is left to do
            sys.exit(3)
        return json.dumps(
            {
                "ok": reply["ok"],
                "value": reply.get("value"),
                "error": reply.get("error"),
                "code": reply.get("code"),
            }
        )


class _Global(STPyV8.JSClass):  # type: ignore[misc]
    """The script's global object: only the host bridge is added to V8's built-ins."""

    def __init__(self, host: Host) -> None:
        self.siestaHost = host


def main(argv: list[str]) -> int:
    return serve(int(argv[1]), int(argv[2]))


def serve(from_service: int, to_service: int) -> int:
    """Be a worker on these two pipes: ready, one script, done."""
    host = Host(to_service, from_service, max_log_bytes=0)
    with STPyV8.JSContext(_Global(host)) as context:
        context.eval(PRELUDE)
        engine = STPyV8.JSEngine()
        # Once, before saying ready: the first script of a process pays for page
        # faults (a fork's copy-on-write, lazily compiled code); a throwaway one
        # takes them off the request path. It leaves no state for the real script
        # (__run keeps nothing between calls).
        _run(context, engine, "JSON.stringify({warm: [1, 'x']})", _WARM_LIMITS)
        send(to_service, {"type": "ready"})
        request = receive(from_service)
        if request is None or request.get("type") != "run":
            return 0
        limits: dict[str, int] = request["limits"]
        host._max_log_bytes = limits["maxLogBytes"]
        send(to_service, _run(context, engine, request["code"], limits))
    return 0


_WARM_LIMITS = {"maxLogs": 1, "maxResultBytes": 64, "maxLogBytes": 64}


def _run(context: Any, engine: Any, code: str, limits: dict[str, int]) -> dict[str, Any]:
    try:
        engine.compile(code)
    except SyntaxError as error:
        syntax = _syntax_error(str(error))
        if _AWAIT_OUTSIDE_ASYNC in syntax["message"]:
            return _async_not_supported(syntax["line"], syntax["column"])
        position = find_async(code)  # e.g. ``for await``: V8 only says "reserved word"
        if position is not None:
            return _async_not_supported(*position)
        return {"type": "done", "result": None, "error": syntax}
    position = find_async(code)
    if position is not None:
        return _async_not_supported(*position)
    outcome = json.loads(context.locals.__run(code, limits["maxLogs"], limits["maxResultBytes"]))
    done: dict[str, Any] = {"type": "done", "droppedLogs": outcome.get("dropped", 0)}
    if outcome.get("promise"):
        done.update(_async_not_supported(None, None))
    elif "error" in outcome:
        done["result"] = None
        done["error"] = _script_error(outcome["error"])
    else:
        result = str(outcome["result"])
        done["result"] = _cut(result, limits["maxResultBytes"])
        done["resultChars"] = int(outcome["resultChars"])
        done["truncated"] = len(done["result"]) < done["resultChars"]
    return done


_AWAIT_OUTSIDE_ASYNC = "await is only valid in async functions"
ASYNC_MESSAGE = (
    "async functions, await and Promises are not supported here: the script runs "
    "synchronously and every helper (callAgent, readExcelFile, ...) returns its value "
    "directly, so call helpers without await and write plain synchronous code"
)


def _async_not_supported(line: int | None, column: int | None) -> dict[str, Any]:
    return {
        "type": "done",
        "result": None,
        "error": {
            "code": JS_ASYNC_NOT_SUPPORTED,
            "message": ASYNC_MESSAGE,
            "line": line,
            "column": column,
        },
    }


def _syntax_error(text: str) -> dict[str, Any]:
    match = _POSITION.search(text)
    message = text.split(" (  @", 1)[0].removeprefix("SyntaxError: ")
    return {
        "code": JS_SYNTAX_ERROR,
        "message": message,
        "line": int(match.group(1)) if match else None,
        "column": int(match.group(2)) + 1 if match else None,
    }


def _script_error(error: dict[str, Any]) -> dict[str, Any]:
    stack = error.get("stack")
    match = _EVAL_FRAME.search(stack or "")
    if stack:
        stack = _EVAL_FRAME.sub(lambda m: f"(script:{m.group(1)}:{m.group(2)})", stack)
        stack = "\n".join(
            line
            for line in stack.splitlines()
            if "__run" not in line and "at eval (<anonymous>)" not in line
        )
    details = {"helperCode": error["code"]} if error.get("code") else {}
    return {
        **details,
        "code": JS_ERROR,
        "message": f"{error.get('name') or 'Error'}: {error.get('message')}",
        "line": int(match.group(1)) if match else None,
        "column": int(match.group(2)) if match else None,
        "stack": stack,
    }


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
