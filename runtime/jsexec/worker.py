"""A JS worker process: V8 (STPyV8) loaded, the helper prelude compiled, one script.

    python -m runtime.jsexec.worker IN_FD OUT_FD

(or forked from the template process, ``zygote.py``, which has V8 loaded
already). Started ahead of time by the pool, it reports ``ready``, runs exactly one
script and exits: V8 cannot be interrupted safely from another thread, so the
service kills the whole process on a timeout or memory breach instead, and a
fresh process means no state leaks from one script into the next.

A script's world is V8's built-ins and the helpers, nothing else: the prelude
closes over a host function (``Bridge``) that takes and returns strings, and
removes it from the global object before any script runs. No Python object is
ever handed to a script, so no attribute, dunder or exception leads back into
the interpreter. Forked workers are also jailed (``jail.py``): the escape suite
in ``tests/runtime/test_js_escape.py`` tries both.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from runtime.core.errors import JS_ASYNC_NOT_SUPPORTED, JS_ERROR, JS_SYNTAX_ERROR
from runtime.jsexec.protocol import receive, send
from runtime.jsexec.syntax import find_async
from runtime.jsexec.v8 import STPyV8

PRELUDE = r"""
(function (bridge) {
  "use strict";
  // Everything the helpers rely on is taken now, before a script can replace it:
  // a script may redefine JSON, String or Error on its global, not these.
  var stringify = JSON.stringify, parse = JSON.parse, toText = String, Failure = Error;
  var isArray = Array.isArray, Thenable = Promise, indirectEval = eval;
  var logState = {kept: 0, dropped: 0, max: 0};

  // The one way out: strings in, a string back. ``bridge`` is a host function the
  // script never sees (it lives only in this closure) and whose errors never reach
  // the script as they are.
  function ask(kind, text) {
    var answer;
    try { answer = bridge(kind, typeof text === "string" ? text : ""); }
    catch (e) { throw new Failure("the service did not answer"); }
    return typeof answer === "string" ? answer : "";
  }
  function textOf(value) {
    if (typeof value === "string") return value;
    if (value === undefined) return "undefined";
    try { var text = stringify(value); if (typeof text === "string") return text; } catch (e) {}
    try { var plain = toText(value); if (typeof plain === "string") return plain; } catch (e) {}
    return "[unprintable value]";
  }
  function isThenable(value) {
    if (value instanceof Thenable) return true;
    if (value === null || (typeof value !== "object" && typeof value !== "function")) return false;
    try { return typeof value.then === "function"; } catch (e) { return false; }
  }
  function call(helper, args) {
    var reply = parse(ask("call", stringify({helper: helper, args: args})));
    if (reply.ok) return reply.value;
    var error = new Failure(toText(reply.error));
    if (typeof reply.code === "string") error.code = reply.code;
    throw error;
  }
  function __run(source, maxLogs, maxChars) {
    logState.max = maxLogs;
    try {
      var value = indirectEval(source);
      if (isThenable(value)) return stringify({promise: true, dropped: logState.dropped});
      var text = textOf(value);
      // Cut here, before the text is copied into the reply: a 100 MB result stays one copy.
      return stringify({result: text.length > maxChars ? text.slice(0, maxChars) : text,
                        resultChars: text.length, dropped: logState.dropped});
    }
    catch (e) {
      var isError = e instanceof Failure;
      var fields = {name: "Error", message: "", code: null, stack: null};
      try {
        fields.name = isError ? toText(e.name) : "Error";
        fields.message = isError ? toText(e.message) : "uncaught " + textOf(e);
        fields.code = isError && typeof e.code === "string" ? e.code : null;
        fields.stack = isError && e.stack ? toText(e.stack) : null;
      } catch (inner) { fields.message = "uncaught error that cannot be printed"; }
      return stringify({dropped: logState.dropped, error: fields});
    }
  }
  var helpers = {
    log: function (message) {
      if (logState.kept < logState.max) { logState.kept++; ask("log", textOf(message)); }
      else { logState.dropped++; }
    },
    logStatus: function (message) { ask("status", textOf(message)); },
    callAgent: function (name, prompt) { return call("callAgent", [name, prompt]); },
    callAgentsParallel: function (names, prompts) {
      return call("callAgentsParallel", [names, prompts]);
    },
    readExcelFile: function (fileName, sheetName, maxRows) {
      return call("readExcelFile", [fileName, sheetName, maxRows === undefined ? null : maxRows]);
    },
    listExcelSheets: function (fileName) { return call("listExcelSheets", [fileName]); },
    writeExcelFile: function (fileName, sheetName, rows) {
      return call("writeExcelFile", [fileName, sheetName, rows]);
    },
    createExcelDocument: function (fileName, sheetName, rows) {
      return call("createExcelDocument", [fileName, sheetName, rows]);
    },
    searchExcelRows: function (fileName, sheetName, columnName, searchValue, options) {
      return call("searchExcelRows", [fileName, sheetName, columnName, searchValue,
                                      options === undefined ? null : options]);
    },
    getExcelColumnStats: function (fileName, sheetName, columnName) {
      return call("getExcelColumnStats", [fileName, sheetName, columnName]);
    },
    copyFileAsArtifact: function (sourceFileName, newFileName) {
      return call("copyFileAsArtifact", [sourceFileName, newFileName]);
    },
    editArtifactFile: function (fileId, content) {
      return call("editArtifactFile", [fileId, content]);
    }
  };
  for (var name in helpers) globalThis[name] = helpers[name];
  // How the worker starts the script: read-only, and called once, before the script.
  Object.defineProperty(globalThis, "__run", {value: __run});
})(globalThis.__siestaBridge);
delete globalThis.__siestaBridge;
"""

_POSITION = re.compile(r"@ (\d+) : (\d+) \)")
_EVAL_FRAME = re.compile(r"\(?eval at __run \([^)]*\), <anonymous>:(\d+):(\d+)\)?")


class Bridge:
    """The worker's side of the prelude's ``bridge``: what a script's helpers ask
    for, as text. The prelude holds it in a closure; a script never sees it, and it
    is a plain function, so there is no object to walk from."""

    def __init__(self, to_service: int, from_service: int) -> None:
        self._out = to_service
        self._in = from_service
        self.max_log_bytes = 0

    def __call__(self, kind: object, text: object) -> str:
        try:
            return self._answer(str(kind), str(text))
        except Exception:  # nothing of Python may reach the script
            return _REFUSED

    def _answer(self, kind: str, text: str) -> str:
        if kind in ("log", "status"):
            send(self._out, {"type": kind, "message": _cut(text, self.max_log_bytes)})
            return ""
        if kind != "call":
            return _REFUSED
        request = json.loads(text)
        send(self._out, {"type": "call", "helper": request["helper"], "args": request["args"]})
        reply = receive(self._in)
        if reply is None:  # the service went away: nothing sensible is left to do
            os._exit(3)
        return json.dumps(
            {
                "ok": reply.get("ok") is True,
                "value": reply.get("value"),
                "error": str(reply.get("error")),
                "code": reply.get("code") if isinstance(reply.get("code"), str) else None,
            }
        )


_REFUSED = json.dumps({"ok": False, "error": "the helper call could not be made"})


def main(argv: list[str]) -> int:
    return serve(int(argv[1]), int(argv[2]))


def serve(from_service: int, to_service: int, lock: Callable[[], None] = lambda: None) -> int:
    """Be a worker on these two pipes: context, ``lock`` (the jail), ready, one
    script, done."""
    bridge = Bridge(to_service, from_service)
    with STPyV8.JSContext() as context:
        context.locals.__siestaBridge = bridge
        context.eval(PRELUDE)
        engine = STPyV8.JSEngine()
        # Once, before saying ready: the first script of a process pays for page
        # faults (a fork's copy-on-write, lazily compiled code); a throwaway one
        # takes them off the request path. It leaves no state for the real script
        # (run keeps nothing between calls).
        _run(context, engine, "JSON.stringify({warm: [1, 'x']})", _WARM_LIMITS)
        lock()
        send(to_service, {"type": "ready"})
        request = receive(from_service)
        if request is None or request.get("type") != "run":
            return 0
        limits: dict[str, int] = request["limits"]
        bridge.max_log_bytes = limits["maxLogBytes"]
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
    outcome = json.loads(
        str(context.locals.__run(code, limits["maxLogs"], limits["maxResultBytes"]))
    )
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
