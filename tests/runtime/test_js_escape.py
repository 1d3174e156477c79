"""The escape suite: a script reaching for Python, on jailed workers.

A script's world must be V8's built-ins and the helpers: no attribute, dunder,
``__reduce__``, ``format`` gadget, ``constructor`` chain or helper exception may
lead to a Python object. Each script here reports what it reached as JSON; the
tests assert it reached nothing (``undefined``, a JS error, plain JS values)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.jsexec.pool import HelperError, ScriptOutcome, WorkerPool
from runtime.jsexec.settings import JsSettings

pytestmark = pytest.mark.slow

ISSUE_PROBE = (
    "var mw = siestaHost.__getattribute__; var ga = mw.__reduce__()[0]; "
    "ga('{0.__class__.__init__.__globals__[sys].modules[os].environ}', 'format')(siestaHost)"
)
DUNDERS = [
    "__class__",
    "__dict__",
    "__globals__",
    "__builtins__",
    "__subclasses__",
    "__reduce__",
    "__reduce_ex__",
    "__init__",
    "__getattribute__",
    "__self__",
    "__func__",
    "__call__",
    "format",
    "format_map",
    "im_func",
    "func_globals",
]
V8_GLOBALS = {
    # what V8 itself puts on a fresh context's global object
    "Object", "Function", "Array", "Number", "parseFloat", "parseInt", "Infinity", "NaN",
    "undefined", "Boolean", "String", "Symbol", "Date", "Promise", "RegExp", "Error",
    "AggregateError", "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError",
    "URIError", "globalThis", "JSON", "Math", "Intl", "ArrayBuffer", "Atomics", "Uint8Array",
    "Int8Array", "Uint16Array", "Int16Array", "Uint32Array", "Int32Array", "Float32Array",
    "Float64Array", "Uint8ClampedArray", "BigUint64Array", "BigInt64Array", "DataView", "Map",
    "BigInt", "Set", "WeakMap", "WeakSet", "Proxy", "Reflect", "FinalizationRegistry",
    "WeakRef", "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape",
    "unescape", "eval", "isFinite", "isNaN", "console", "SharedArrayBuffer", "WebAssembly",
    "Iterator", "Float16Array", "SuppressedError", "DisposableStack", "AsyncDisposableStack",
}  # fmt: skip
HELPERS = {
    "log", "logStatus", "callAgent", "callAgentsParallel", "readExcelFile", "listExcelSheets",
    "writeExcelFile", "createExcelDocument", "searchExcelRows", "getExcelColumnStats",
    "copyFileAsArtifact", "editArtifactFile", "__run",
}  # fmt: skip


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    pool = WorkerPool(JsSettings(pool_size=2, jail="full", timeout_seconds=10))
    yield pool
    pool.close()


def dispatch(helper: str, args: list[Any], _remaining: float) -> Any:
    if helper == "readExcelFile":
        msg = f"{helper}: no conversation file named {args[0]!r}"
        raise HelperError(msg, "file_not_found")
    if helper == "callAgent":
        msg = "a helper's own bug, with a Python traceback"
        raise ValueError(msg)
    return {"rows": [{"a": 1}], "helper": helper}


def run(pool: WorkerPool, code: str) -> ScriptOutcome:
    return pool.run(code, dispatch, lambda _: None, 10)


def reached(pool: WorkerPool, code: str) -> Any:
    outcome = run(pool, code)
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    return json.loads(outcome.result)


def test_the_probe_of_the_issue_answers_a_js_error_not_the_environment(pool: WorkerPool) -> None:
    outcome = run(pool, ISSUE_PROBE)
    assert outcome.result is None
    assert outcome.error is not None
    assert outcome.error["message"] == "ReferenceError: siestaHost is not defined"
    assert "environ" not in json.dumps(outcome.error)


def test_no_dunder_or_gadget_is_reachable_from_anything_a_script_holds(pool: WorkerPool) -> None:
    code = f"""
    var names = {json.dumps(DUNDERS)};
    var thrown; try {{ readExcelFile('x.xlsx', 'S') }} catch (e) {{ thrown = e }};
    var crashed; try {{ callAgent('a', 'b') }} catch (e) {{ crashed = e }};
    var held = {{log: log, logStatus: logStatus, callAgent: callAgent, readExcelFile: readExcelFile,
                 globalThis: globalThis, thrown: thrown, crashed: crashed,
                 returned: listExcelSheets('x.xlsx'), returnedRows: listExcelSheets('x.xlsx').rows,
                 run: __run}};
    var found = [];
    for (var key in held) {{
      names.forEach(function (name) {{
        var value; try {{ value = held[key][name] }} catch (e) {{ value = undefined }}
        if (value !== undefined) found.push(key + '.' + name + ':' + typeof value);
      }});
    }}
    JSON.stringify(found)
    """
    assert reached(pool, code) == []


def test_a_helpers_error_is_a_plain_js_error_without_python_in_it(pool: WorkerPool) -> None:
    code = """
    var out = {};
    try { readExcelFile('x.xlsx', 'S') } catch (e) {
      out.refused = {proto: Object.getPrototypeOf(e) === Error.prototype,
                     own: Object.getOwnPropertyNames(e).sort(), message: e.message, code: e.code};
    }
    try { callAgent('a', 'b') } catch (e) {
      out.bug = {proto: Object.getPrototypeOf(e) === Error.prototype, message: e.message,
                 stack: String(e.stack)};
    }
    JSON.stringify(out)
    """
    out = reached(pool, code)
    assert out["refused"] == {
        "proto": True,
        "own": ["code", "message", "stack"],
        "message": "readExcelFile: no conversation file named 'x.xlsx'",
        "code": "file_not_found",
    }
    assert out["bug"]["proto"] is True
    assert out["bug"]["message"] == "callAgent: failed"
    for python_trace in ("Traceback", ".py", "ValueError", "a helper's own bug"):
        assert python_trace not in out["bug"]["stack"]


def test_every_chain_of_constructors_and_prototypes_ends_in_v8(pool: WorkerPool) -> None:
    code = """
    (function () {
    var g = constructor.constructor('return this')();
    var viaHelper = log.constructor('return this')();
    var protos = [log, readExcelFile, listExcelSheets('x'), __run].map(function (v) {
      var chain = []; var p = Object.getPrototypeOf(v);
      while (p) {
        chain.push(p === Function.prototype ? 'Function' : p === Object.prototype ? 'Object' : '?');
        p = Object.getPrototypeOf(p);
      }
      return chain.join('>');
    });
    return JSON.stringify({same: g === globalThis && viaHelper === globalThis, protos: protos,
                           names: Object.getOwnPropertyNames(g), bridge: typeof __siestaBridge,
                           host: typeof siestaHost});
    })()
    """
    out = reached(pool, code)
    assert out["same"] is True
    assert out["protos"] == ["Function>Object", "Function>Object", "Object", "Function>Object"]
    assert set(out["names"]) - V8_GLOBALS == HELPERS
    assert out["bridge"] == "undefined"
    assert out["host"] == "undefined"


def test_stack_frames_hand_out_no_function_or_receiver_of_the_prelude(pool: WorkerPool) -> None:
    code = """
    var seen = [];
    Error.prepareStackTrace = function (error, frames) {
      frames.forEach(function (f) {
        var fn = f.getFunction(), self = f.getThis();
        if (fn !== undefined || self !== undefined) seen.push(String(f.getFunctionName()));
      });
      return 'stack';
    };
    try { log({toJSON: function () { return new Error('inside the prelude').stack }}) } catch (e) {}
    try { readExcelFile('x.xlsx', 'S') } catch (e) { e.stack }
    JSON.stringify(seen.filter(function (name) { return name !== 'toJSON' }))
    """
    assert reached(pool, code) == []


def test_a_script_cannot_replace_how_the_worker_runs_it_or_what_helpers_use(
    pool: WorkerPool,
) -> None:
    code = """
    var results = [];
    var before = __run;
    __run = function () { return 'mine' };
    results.push(__run === before ? 'kept' : 'replaced');
    JSON.stringify = function () { return {not: 'a string'} };
    JSON.parse = function () { return {ok: true, value: 'forged'} };
    Error = function () { return {forged: true} };
    var sheets = listExcelSheets('x.xlsx');
    results.push(sheets.helper);
    try { readExcelFile('x.xlsx', 'S') } catch (e) { results.push(e.message) }
    results.join('|')
    """
    outcome = run(pool, code)
    assert outcome.error is None, outcome.error
    assert outcome.result == (
        "kept|listExcelSheets|readExcelFile: no conversation file named 'x.xlsx'"
    )
