"""Lease latency and no-op operation throughput on Redis, against raw Redis.

    python -m bench.leases [--iterations N] [--seconds S] [--threads T]

Starts a private redis-server, then measures in one run:

* latency of one lease acquire + release (our Lua scripts, fence included)
  against raw ``SET NX PX`` + a compare-and-delete script;
* throughput, from T threads over 100 conversations, of (a) acquire+release
  pairs, raw and ours, and (b) complete no-op sandbox operations
  (``SessionManager.operation`` on the fake provider: lease with its renewer
  thread, session lookup, sandbox state check, fenced touch, release).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import redis

from runtime.core.context import CallContext
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.providers.fake import FakeProvider
from runtime.seams.stores import Stores
from runtime.services import assemble_sessions
from runtime.sessions.manager import SessionManager
from runtime.sessions.settings import CapacitySettings, LeaseSettings
from runtime.settings import Settings
from runtime.store.redis import open_redis
from tests.redis_server import RedisServer

COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
CONVERSATIONS = 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="siesta-bench-") as tmp:
        server = RedisServer(Path(tmp) / "redis")
        server.start()
        try:
            run(server.url, Path(tmp), args.iterations, args.seconds, args.threads)
        finally:
            server.stop()
    return 0


def run(url: str, tmp: Path, iterations: int, seconds: float, threads: int) -> None:
    raw = redis.Redis.from_url(url, decode_responses=True)
    cad = raw.register_script(COMPARE_AND_DELETE)
    store = open_redis(url)

    def raw_pair(key: str) -> None:
        token = uuid.uuid4().hex
        if raw.set(f"raw:{key}", token, nx=True, px=10_000):
            cad(keys=[f"raw:{key}"], args=[token])

    def our_pair(key: str) -> None:
        owner = uuid.uuid4().hex
        if store.leases.acquire_lease(key, owner, 10.0) is not None:
            store.leases.release_lease(key, owner)

    sessions = _sessions(store, tmp)

    def noop_operation(key: str) -> None:
        with sessions.operation(CallContext("bench", "u", key.split("/")[1], base_image="img")):
            pass

    for index in range(CONVERSATIONS):  # provision once: measure the steady state
        noop_operation(f"bench/c{index}")

    latencies = {
        "raw SET NX + CAD": _latencies(raw_pair, iterations),
        "lease acquire+release": _latencies(our_pair, iterations),
    }
    print(f"{'latency (one key, serial)':<28}{'n':>6}{'p50 us':>10}{'p90 us':>10}")
    for name, values in latencies.items():
        print(f"{name:<28}{len(values):>6}{_pct(values, 0.5):>10.0f}{_pct(values, 0.9):>10.0f}")
    ratio = _pct(latencies["lease acquire+release"], 0.5) / _pct(latencies["raw SET NX + CAD"], 0.5)
    print(f"lease / raw p50: x{ratio:.2f}\n")

    rates = {
        "raw SET NX + CAD": _throughput(raw_pair, seconds, threads),
        "lease acquire+release": _throughput(our_pair, seconds, threads),
        "no-op operation": _throughput(noop_operation, seconds, threads),
    }
    print(f"{'throughput (' + str(threads) + ' threads)':<28}{'ops/s':>10}{'x raw':>8}")
    for name, rate in rates.items():
        print(f"{name:<28}{rate:>10.0f}{rate / rates['raw SET NX + CAD']:>8.2f}")
    sessions.close()
    store.close()
    raw.close()


def _sessions(store: Stores, tmp: Path) -> SessionManager:
    provider = FakeProvider(tmp / "fake")
    catalog = ImageCatalog([CatalogImage(id="img", title="img", image="none")], tmp)
    capacity = CapacitySettings(
        max_active_per_org=1000, max_active_per_user=1000, max_active_per_host=1000
    )
    settings = Settings(lease=LeaseSettings(ttl_seconds=15, wait_seconds=30), capacity=capacity)
    sessions, _, _, _ = assemble_sessions(store, provider, catalog, settings)
    return sessions


def _latencies(action: Callable[[str], None], iterations: int) -> list[float]:
    values = []
    for _ in range(iterations):
        started = time.perf_counter()
        action("bench/latency")
        values.append((time.perf_counter() - started) * 1e6)
    return values


def _throughput(action: Callable[[str], None], seconds: float, threads: int) -> float:
    deadline = time.monotonic() + seconds
    counts = [0] * threads

    def worker(index: int) -> None:
        n = 0
        while time.monotonic() < deadline:
            action(f"bench/c{(index * 7 + n) % CONVERSATIONS}")
            n += 1
        counts[index] = n

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(counts) / seconds


def _pct(values: list[float], fraction: float) -> float:
    return statistics.quantiles(values, n=100)[int(fraction * 100) - 1]


if __name__ == "__main__":
    sys.exit(main())
