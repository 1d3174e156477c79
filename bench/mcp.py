"""``python -m bench.mcp``: what the MCP layer adds to a call.

One ``siesta-runtime serve`` with the fake provider (no Docker: the command is a
host process, so the figures are the layers' cost, not a sandbox's), one warm
conversation per path. Serially, ``runCommand("true")`` and ``JsExecutorAgent("1+1")``:
direct HTTP (the baseline) against MCP over streamable HTTP (one client session)
and over stdio (``siesta-runtime mcp`` on the same data directory).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from bench.common import Bench, median, percentile
from tests.helpers import REPO, ServiceProcess

CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "runCommand true": ("runCommand", {"command": "true"}),
    "JS 1+1": ("JsExecutorAgent", {"code": "1+1"}),
}


def direct(bench: Bench, client: httpx.Client, conversation: str, function: str) -> None:
    name, body = CALLS[function]
    path = "js" if name == "JsExecutorAgent" else f"sandbox/{name}"
    response = client.post(
        f"/v1/conversations/{conversation}/{path}", json=body, headers=bench.headers()
    )
    response.raise_for_status()


@contextlib.asynccontextmanager
async def over_http(
    bench: Bench, service: ServiceProcess, conversation: str
) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={**bench.headers(), "X-Siesta-Conversation": conversation})
    transport = streamable_http_client(f"{service.base_url}/mcp", http_client=http)
    async with http, Client(transport) as client:
        yield client


@contextlib.asynccontextmanager
async def over_stdio(
    bench: Bench, service: ServiceProcess, conversation: str
) -> AsyncIterator[Client]:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "SIESTA_DATA_DIR": str(service.data_dir),
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_RECONCILE__BACKGROUND": "false",
    }
    context = ["--org", "bench", "--user", "bench", "--conversation", conversation]
    context += ["--base-image", "debian-base"]
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "cli.main", "mcp", *context], env=env, cwd=REPO
    )
    async with Client(parameters) as client:
        yield client


async def mcp_samples(
    connect: Callable[[], contextlib.AbstractAsyncContextManager[Client]], function: str, n: int
) -> list[float]:
    name, arguments = CALLS[function]
    async with connect() as client:
        await client.call_tool(name, arguments)  # warm: the sandbox and the session
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            result = await client.call_tool(name, arguments)
            samples.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result
    return samples


HEADER = "| call | path | n | p50 ms | p90 ms | / direct p50 |\n|---|---|---:|---:|---:|---:|"
PATHS = (("MCP streamable HTTP", over_http), ("MCP stdio", over_stdio))


def measure(bench: Bench, service: ServiceProcess, function: str, n: int) -> None:
    """One table row per path, each on its own warm conversation."""
    conversation = f"bench-{uuid.uuid4().hex[:8]}"
    direct(bench, service.client, conversation, function)
    baseline = []
    for _ in range(n):
        started = time.perf_counter()
        direct(bench, service.client, conversation, function)
        baseline.append((time.perf_counter() - started) * 1000)
    rows = {"direct HTTP": baseline}
    for path, connect in PATHS:
        other = f"bench-{uuid.uuid4().hex[:8]}"
        opened = lambda c=connect, o=other: c(bench, service, o)  # noqa: E731
        rows[path] = anyio.run(mcp_samples, opened, function, n)
    for path, samples in rows.items():
        ratio = median(samples) / median(baseline)
        print(
            f"| {function} | {path} | {n} | {median(samples):.2f} | "
            f"{percentile(samples, 0.9):.2f} | {ratio:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=200)
    n = parser.parse_args().n
    bench = Bench()
    with tempfile.TemporaryDirectory() as data:
        service = bench.start(
            Path(data), SIESTA_PROVIDER__TYPE="fake", SIESTA_RECONCILE__BACKGROUND="false"
        )
        try:
            print(HEADER)
            for function in CALLS:
                measure(bench, service, function, n)
        finally:
            service.stop()


if __name__ == "__main__":
    main()
