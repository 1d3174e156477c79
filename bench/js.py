"""The JavaScript executor against bare V8 and openpyxl, measured in one run.

    python -m bench.js [--runs N] [--rows R]

* ``1+1``: through the HTTP API and straight through the pool, once with a
  worker ready (one call per second) and once back to back (bounded by
  starting workers: one script per worker); baseline: ``eval`` in a warm V8
  context in this process.
* a helper round trip (``listExcelSheets`` on a cached workbook), per call;
  baseline: a plain JS function call.
* a stuck worker: how late past its deadline the answer comes, and how long
  until the pool is full again.
* ``readExcelFile`` and ``createExcelDocument`` of R rows; baseline: openpyxl
  reading the same file.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import STPyV8
from openpyxl import Workbook, load_workbook

from runtime.config import JsSettings, Settings
from runtime.context import CallContext
from runtime.services import Services
from runtime.store.records import FileKind
from tests.helpers import ServiceProcess, spawn_service


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="siesta-bench-") as tmp:
        settings = Settings(
            data_dir=Path(tmp) / "inproc",
            provider={"type": "fake"},
            js=JsSettings(pool_size=2, timeout_seconds=60),
        )
        services = Services.build(settings)
        service = _start_service(Path(tmp) / "http")
        try:
            _one_plus_one(services, service, args.runs)
            _helper_round_trip(services)
            _stuck_worker(services)
            _excel(services, args.rows)
        finally:
            service.stop()
            services.close()
    return 0


def _start_service(data_dir: Path) -> ServiceProcess:
    data_dir.mkdir(parents=True)
    token = uuid.uuid4().hex * 2
    env = {
        **os.environ,
        "SIESTA_API_TOKEN": token,
        "SIESTA_DATA_DIR": str(data_dir),
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_JS__POOL_SIZE": "2",
    }
    service = spawn_service(data_dir, env)
    service.client.headers.update(
        {"Authorization": f"Bearer {token}", "X-Siesta-Org": "b", "X-Siesta-User": "b"}
    )
    time.sleep(3)  # let the pool fill
    return service


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def _row(name: str, values: list[float], baseline: float | None = None) -> None:
    p50 = statistics.median(values)
    p99 = sorted(values)[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
    ratio = f"  x{p50 / baseline:.0f} baseline" if baseline else ""
    print(f"  {name:<34} n={len(values):<4} p50 {p50:9.2f} ms  p99 {p99:9.2f} ms{ratio}")


def _one_plus_one(services: Services, service: ServiceProcess, runs: int) -> None:
    ctx = CallContext("b", "b", "bench-js")
    context = STPyV8.JSContext()
    with context:
        context.eval("1+1")
        bare = [_timed(lambda: context.eval("1+1")) for _ in range(1000)]

    def http() -> None:
        body = service.client.post("/v1/conversations/bench-js/js", json={"code": "1+1"}).json()
        assert body["result"] == "2", body

    def pool() -> None:
        assert services.js.run(ctx, "1+1").result == "2"

    print("1+1")
    _row("bare V8 eval (warm context)", bare)
    baseline = statistics.median(bare)
    for name, action in (("HTTP API, worker ready", http), ("pool, worker ready", pool)):
        ready = []
        for _ in range(runs):
            time.sleep(1.0)  # a replacement worker is up by then
            ready.append(_timed(action))
        _row(name, ready, baseline)
    for name, action in (("HTTP API, back to back", http), ("pool, back to back", pool)):
        _row(name, [_timed(action) for _ in range(runs)], baseline)


def _helper_round_trip(services: Services) -> None:
    ctx = CallContext("b", "b", "bench-helpers")
    services.files.add_bytes(ctx, "t.xlsx", FileKind.ATTACHMENT, _workbook(10))
    time.sleep(1.5)
    calls = 2000
    code = (
        f"listExcelSheets('t.xlsx'); var t = Date.now(); "
        f"for (var i = 0; i < {calls}; i++) listExcelSheets('t.xlsx'); Date.now() - t"
    )
    helper_ms = float(services.js.run(ctx, code).result or "nan") / calls
    time.sleep(1.5)
    plain = (
        "function f(x) { return [x]; } var t = Date.now(); "
        "for (var i = 0; i < 1e6; i++) f(i); Date.now() - t"
    )
    plain_ms = float(services.js.run(ctx, plain).result or "nan") / 1e6
    print("helper round trip")
    print(
        f"  listExcelSheets (cached)            {helper_ms * 1000:9.1f} us per call"
        f"  x{helper_ms / max(plain_ms, 1e-9):.0f} a plain JS call ({plain_ms * 1e6:.1f} ns)"
    )


def _stuck_worker(services: Services) -> None:
    ctx = CallContext("b", "b", "bench-stuck")
    time.sleep(1.5)
    timeout = 1.0
    started = time.perf_counter()
    body = services.js.run(ctx, "while (true) {}", timeout_seconds=timeout)
    answered = time.perf_counter() - started
    assert body.error is not None and body.error.code == "js_timeout"
    refilled = time.perf_counter()
    pool = services.js._pool
    while pool._ready.qsize() < services.settings.js.pool_size:
        time.sleep(0.01)
    print("stuck worker (while(true){}, deadline 1 s)")
    print(f"  answer after the deadline           {(answered - timeout) * 1000:9.1f} ms")
    print(
        f"  pool full again after the answer    {(time.perf_counter() - refilled) * 1000:9.1f} ms"
    )


def _excel(services: Services, rows: int) -> None:
    ctx = CallContext("b", "b", "bench-excel")
    data = _workbook(rows)
    services.files.add_bytes(ctx, "big.xlsx", FileKind.ATTACHMENT, data)
    time.sleep(1.5)
    read = services.js.run(
        ctx,
        "var t = Date.now(); var r = readExcelFile('big.xlsx', 'S'); [r.length, Date.now() - t]",
    )
    count, read_ms = json.loads(read.result or "[]")
    time.sleep(1.5)
    create = services.js.run(
        ctx,
        f"var rows = []; for (var i = 0; i < {rows}; i++) rows.push({{id: i, name: 'n' + i,"
        " amount: i * 1.5}); var t = Date.now(); createExcelDocument('out.xlsx', 'S', rows);"
        " Date.now() - t",
    )
    openpyxl_ms = _timed(
        lambda: list(
            load_workbook(io.BytesIO(data), read_only=True)["S"].iter_rows(values_only=True)
        )
    )
    print(f"spreadsheets ({rows} rows)")
    print(
        f"  readExcelFile (calamine + JSON)     {read_ms:9.0f} ms  rows={count}"
        f"  openpyxl read-only alone: {openpyxl_ms:.0f} ms (x{read_ms / openpyxl_ms:.2f})"
    )
    print(f"  createExcelDocument (xlsxwriter)    {float(create.result or 'nan'):9.0f} ms")


def _workbook(rows: int) -> bytes:
    book = Workbook(write_only=True)
    sheet = book.create_sheet("S")
    sheet.append(["id", "name", "amount"])
    for i in range(rows):
        sheet.append([i, f"name {i}", i * 1.5])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


if __name__ == "__main__":
    sys.exit(main())
