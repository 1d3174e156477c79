"""The measures of the suite, each with its baseline taken in the same run.

Every function returns ``Figure`` rows; ``suite.py`` prints them and writes
``bench/results.md``. Baselines are the plain-Docker (or bare-V8) way of doing
the same thing on the same machine, interleaved with ours where that is
possible, so machine noise hits both sides.
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
import httpx

from bench.common import IMAGE_REF, Bench, median, percentile, timed
from tests.helpers import ServiceProcess


@dataclass(frozen=True)
class Figure:
    name: str
    ours: float
    unit: str
    baseline_name: str = ""
    baseline: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""


def _true(bench: Bench, client: httpx.Client, conversation: str) -> None:
    bench.call(client, conversation, "runCommand", {"command": "true"})


# -- runCommand, warm ------------------------------------------------------------------


def warm_command(bench: Bench, service: ServiceProcess, container: str, n: int) -> list[Figure]:
    conversation = f"warm-{uuid.uuid4().hex[:6]}"
    bench.call(service.client, conversation, "runCommand", {"command": "true"})

    def ours() -> None:
        bench.call(service.client, conversation, "runCommand", {"command": "true"})

    def docker_exec() -> None:
        subprocess.run(["docker", "exec", container, "true"], check=True)

    api, cli = [], []
    for _ in range(5):
        ours()
        docker_exec()
    for i in range(n):
        api.append(timed(ours))
        if i % 4 == 0:  # docker exec is slow: a quarter as many samples is plenty
            cli.append(timed(docker_exec))
    p50, base = median(api), median(cli)
    return [
        Figure(
            "warm runCommand(true) over HTTP, p50",
            p50,
            "ms",
            "docker exec <container> true",
            base,
            "≤ 8 ms and ≥ 7x faster",
            p50 <= 8 and base / p50 >= 7,
            f"x{base / p50:.1f} faster; p90 {percentile(api, 0.9):.1f} ms",
        )
    ]


# -- throughput ------------------------------------------------------------------------


def throughput(
    bench: Bench, service: ServiceProcess, container: str, seconds: float
) -> list[Figure]:
    conversations = [f"tp-{i}-{uuid.uuid4().hex[:4]}" for i in range(50)]
    for conversation in conversations:  # warm: each has its sandbox
        bench.call(service.client, conversation, "runCommand", {"command": "true"})
    rss_before = service.rss_kb()

    def client_loop(index: int, out: list[float], until: float) -> None:
        with httpx.Client(base_url=service.base_url, timeout=60) as client:
            i = index
            while time.monotonic() < until:
                conversation = conversations[i % len(conversations)]
                out.append(timed(functools.partial(_true, bench, client, conversation)))
                i += 16

    latencies = _concurrently(16, seconds, client_loop)
    peak_kb = service.peak_rss_kb()
    ops = len(latencies) / seconds

    def docker_loop(index: int, out: list[float], until: float) -> None:
        while time.monotonic() < until:
            out.append(
                timed(lambda: subprocess.run(["docker", "exec", container, "true"], check=True))
            )

    base_ops = len(_concurrently(16, min(seconds, 10.0), docker_loop)) / min(seconds, 10.0)
    p50, p99 = median(latencies), percentile(latencies, 0.99)
    return [
        Figure(
            "throughput: 16 clients, 50 warm conversations, ops/s",
            ops,
            "ops/s",
            "16 concurrent docker exec loops",
            base_ops,
            "≥ 150 ops/s, p99 ≤ 250 ms",
            ops >= 150 and p99 <= 250,
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms",
        ),
        Figure(
            "service RSS during the throughput run (peak)",
            peak_kb / 1024,
            "MB",
            "",
            None,
            "≤ 150 MB",
            peak_kb / 1024 <= 150,
            f"{rss_before / 1024:.0f} MB before the run",
        ),
    ]


def _concurrently(
    workers: int, seconds: float, loop: Callable[[int, list[float], float], None]
) -> list[float]:
    until = time.monotonic() + seconds
    results: list[list[float]] = [[] for _ in range(workers)]
    threads = [threading.Thread(target=loop, args=(i, results[i], until)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [value for values in results for value in values]


# -- first operation, pool warm --------------------------------------------------------


def first_operation(bench: Bench, service: ServiceProcess, n: int, pool_size: int) -> list[Figure]:
    def pool_ready() -> int:
        for line in service.client.get("/metrics").text.splitlines():
            if line.startswith('siesta_pool_members{image="debian-base"}'):
                return int(float(line.split()[-1]))
        return 0

    hits_before = _metric(service, 'siesta_pool_claims_total{outcome="hit"}')
    ours, run_rm = [], []
    for _ in range(n):
        deadline = time.monotonic() + 60
        while pool_ready() < pool_size and time.monotonic() < deadline:
            time.sleep(0.1)
        conversation = f"first-{uuid.uuid4().hex[:6]}"
        ours.append(timed(functools.partial(_true, bench, service.client, conversation)))
        service.client.delete(f"/v1/conversations/{conversation}", headers=bench.headers())
        run_rm.append(
            timed(
                lambda: subprocess.run(
                    [
                        "docker",
                        "run",
                        "--rm",
                        "--network",
                        "none",
                        "--label",
                        bench.label,
                        IMAGE_REF,
                        "true",
                    ],
                    check=True,
                    capture_output=True,
                )
            )
        )
    p50, base = median(ours), median(run_rm)
    hits = _metric(service, 'siesta_pool_claims_total{outcome="hit"}') - hits_before
    return [
        Figure(
            "first operation of a new conversation, pool warm, p50",
            p50,
            "ms",
            "docker run --rm <image> true",
            base,
            "≤ 50 ms",
            p50 <= 50,
            f"{hits:.0f} of {n} from the pool",
        )
    ]


def _metric(service: ServiceProcess, prefix: str) -> float:
    for line in service.client.get("/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return 0.0


# -- files -----------------------------------------------------------------------------


def files(bench: Bench, service: ServiceProcess, container: str, n: int) -> list[Figure]:
    conversation = f"files-{uuid.uuid4().hex[:6]}"
    content = ("x" * 1023 + "\n") * 1024  # 1 MiB of text
    bench.call(service.client, conversation, "runCommand", {"command": "true"})

    def ours() -> None:
        bench.call(
            service.client, conversation, "writeFile", {"path": "big.txt", "content": content}
        )
        read = bench.call(service.client, conversation, "readFile", {"path": "big.txt"})
        assert read["size"] == len(content)

    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "big.txt", Path(tmp) / "back.txt"
        source.write_text(content)

        def docker_cp() -> None:
            subprocess.run(["docker", "cp", str(source), f"{container}:/tmp/big.txt"], check=True)
            subprocess.run(["docker", "cp", f"{container}:/tmp/big.txt", str(target)], check=True)

        api, cp = [], []
        for _ in range(n):
            api.append(timed(ours))
            cp.append(timed(docker_cp))
    listing = []
    for _ in range(n * 5):
        listing.append(timed(lambda: bench.call(service.client, conversation, "listFiles", {})))
    ls = [
        timed(
            lambda: subprocess.run(
                ["docker", "exec", container, "ls", "-la", "/mnt/work"],
                check=True,
                capture_output=True,
            )
        )
        for _ in range(n)
    ]
    p50, base = median(api), median(cp)
    return [
        Figure(
            "writeFile + readFile 1 MB, p50",
            p50,
            "ms",
            "docker cp in + out",
            base,
            "≤ 0.5x docker cp",
            p50 <= 0.5 * base,
            f"x{p50 / base:.2f} of docker cp",
        ),
        Figure(
            "listFiles, p50",
            median(listing),
            "ms",
            "docker exec <container> ls -la",
            median(ls),
            "≤ 8 ms",
            median(listing) <= 8,
        ),
    ]


# -- JavaScript ------------------------------------------------------------------------


def javascript(bench: Bench, service: ServiceProcess, n: int) -> list[Figure]:
    def script() -> None:
        response = service.client.post(
            f"/v1/conversations/js-{uuid.uuid4().hex[:4]}/js",
            json={"code": "1+1"},
            headers=bench.headers(),
        )
        assert response.json()["result"] == "2", response.text

    for _ in range(5):
        script()
    ready = []
    for _ in range(n):
        time.sleep(0.2)  # the pool is full again
        ready.append(timed(script))
    back_to_back = [timed(script) for _ in range(n)]
    bare = _bare_v8(n)
    return [
        Figure(
            "JS 1+1 over HTTP, worker ready, p50",
            median(ready),
            "ms",
            "eval in a warm V8 context (no process, no HTTP)",
            bare,
            "≤ 5 ms",
            median(ready) <= 5,
        ),
        Figure(
            "JS 1+1 over HTTP, back to back, p50",
            median(back_to_back),
            "ms",
            "eval in a warm V8 context",
            bare,
            "≤ 15 ms",
            median(back_to_back) <= 15,
        ),
    ]


def _bare_v8(n: int) -> float:
    import STPyV8

    with STPyV8.JSContext() as context:
        context.eval("1+1")
        return median([timed(lambda: context.eval("1+1")) for _ in range(n)])


# -- idle sessions per GB --------------------------------------------------------------


def idle_density(
    bench: Bench, service: ServiceProcess, client: docker.DockerClient, count: int
) -> list[Figure]:
    """Memory an idle paused session costs the host: the container's own memory
    (its cgroup) plus its share of the engine (the containerd shim's private memory
    and dockerd/containerd growth), against the same for plain paused containers."""
    engine_before = engine_kb()
    conversations = [f"idle-{i}-{uuid.uuid4().hex[:4]}" for i in range(count)]
    sandboxes = []
    for conversation in conversations:
        bench.call(service.client, conversation, "runCommand", {"command": "true"})
        sandboxes.append(bench.sandbox_of(service, conversation))
    for name in sandboxes:
        client.api.pause(name)
    time.sleep(1)
    ours_kb = sum(container_kb(client, n) for n in sandboxes) + engine_kb() - engine_before
    plain_before = engine_kb()
    plain = [
        str(
            client.containers.run(
                IMAGE_REF, detach=True, network_mode="none", labels={"siesta.bench": bench.run_id}
            ).name
        )
        for _ in range(count)
    ]
    for name in plain:
        client.api.pause(name)
    time.sleep(1)
    plain_kb = sum(container_kb(client, n) for n in plain) + engine_kb() - plain_before
    for name in sandboxes:
        client.api.unpause(name)
    per_gb = 1024 * 1024 / max(1.0, ours_kb / count)
    plain_per_gb = 1024 * 1024 / max(1.0, plain_kb / count)
    return [
        Figure(
            "idle paused sessions per GB of host memory",
            per_gb,
            "per GB",
            "plain paused containers of the same image",
            plain_per_gb,
            "≥ 250",
            per_gb >= 250,
            f"{ours_kb / count / 1024:.1f} MB per session (container + engine share)",
        )
    ]


def container_kb(client: docker.DockerClient, name: str) -> float:
    """A container's memory: its cgroup's usage plus its containerd shim's private memory."""
    attrs = client.api.inspect_container(name)
    container_id = str(attrs["Id"])
    shim = _shim_pid(container_id)
    memory = 0.0
    for path in (
        f"/sys/fs/cgroup/memory/docker/{container_id}/memory.usage_in_bytes",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.current",
        f"/sys/fs/cgroup/docker/{container_id}/memory.current",
    ):
        if Path(path).exists():
            memory = int(Path(path).read_text()) / 1024
            break
    return memory + (_private_kb(shim) if shim else 0.0)


def _shim_pid(container_id: str) -> int | None:
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmdline = status.read_bytes()
        except OSError:
            continue
        if b"containerd-shim" in cmdline and container_id.encode() in cmdline:
            return int(status.parent.name)
    return None


def _private_kb(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0
    fields = dict(line.split(":", 1) for line in text.splitlines()[1:] if ":" in line)
    return sum(float(fields.get(k, "0 kB").split()[0]) for k in ("Private_Clean", "Private_Dirty"))


def engine_kb() -> float:
    """Private memory of dockerd and containerd (their growth is the engine's share)."""
    total = 0.0
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue
        if name in ("dockerd", "containerd"):
            total += _private_kb(int(comm.parent.name))
    return total


# -- resume ----------------------------------------------------------------------------


def resume(bench: Bench, client: docker.DockerClient, n: int) -> list[Figure]:
    """In this process (the service's runtime without HTTP): suspend a session the
    way the idle tiers do, then time the operation that resumes it."""
    from runtime.core.context import CallContext
    from runtime.seams.provider_settings import SandboxSettings
    from runtime.sessions.lifecycle import Lifecycle
    from runtime.sessions.settings import PoolSettings
    from runtime.settings import Settings
    from runtime.wiring import build_services

    with tempfile.TemporaryDirectory(prefix="siesta-bench-") as tmp:
        services = build_services(
            Settings(
                data_dir=Path(tmp),
                # The run's own disk folder: the suite's clean-up removes it with the rest.
                sandbox=SandboxSettings(
                    extra_labels={"siesta.bench": bench.run_id}, disk_dir=bench.disk_root
                ),
                pool=PoolSettings(enabled=False),
            )
        )
        try:
            ctx = CallContext("bench", "bench", f"resume-{bench.run_id}", base_image="debian-base")
            services.sandbox.run_command(ctx, "true")
            lifecycle = Lifecycle(
                services.stores.sessions,
                services.stores.capacity,
                services.provider,
                services.settings.capacity,
            )
            baseline = str(
                client.containers.run(
                    IMAGE_REF,
                    detach=True,
                    network_mode="none",
                    labels={"siesta.bench": bench.run_id},
                ).name
            )

            def ours(transition: Callable[..., bool]) -> float:
                with services.leases.hold(ctx.key) as lease:
                    record = services.stores.sessions.get_session(ctx.org, ctx.conversation)
                    assert record is not None
                    transition(record, lease)
                return timed(lambda: services.sandbox.run_command(ctx, "true"))

            def plain(suspend: str, wake: str) -> float:
                subprocess.run(["docker", suspend, baseline], check=True, capture_output=True)

                def back() -> None:
                    subprocess.run(["docker", wake, baseline], check=True, capture_output=True)
                    subprocess.run(["docker", "exec", baseline, "true"], check=True)

                return timed(back)

            paused, unpause, stopped, start = [], [], [], []
            for _ in range(n):
                paused.append(ours(lifecycle.pause))
                unpause.append(plain("pause", "unpause"))
                stopped.append(ours(lifecycle.stop))
                start.append(plain("stop", "start"))
        finally:
            services.close()
    return [
        Figure(
            "resume from paused (operation incl. resume), p50",
            median(paused),
            "ms",
            "docker unpause + docker exec",
            median(unpause),
            "≤ 15 ms",
            median(paused) <= 15,
            "in-process (no HTTP)",
        ),
        Figure(
            "resume from stopped (operation incl. resume), p50",
            median(stopped),
            "ms",
            "docker start + docker exec",
            median(start),
            "≤ 250 ms",
            median(stopped) <= 250,
            "in-process (no HTTP)",
        ),
    ]
