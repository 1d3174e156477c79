"""A hostile sandbox, for half a minute, against the control plane (issue 38).

From inside real sandboxes, at once: a flood of CONNECTs to unique made-up names
through the egress proxy, files created and renamed under a watched tree with
long paths, a port server that talks before anyone asked and never stops, a
shadowed ``find`` that answers listings with endless output, and E2B uploads
over the limit. Meanwhile a neighbour conversation keeps running commands.

Asserted: the service's memory (its whole process tree) stays under a stated
bound, ``/metrics`` stays under a stated size and gains no series per name, the
neighbour's p95 stays within twice its quiet figure, and every refusal names
its limit.
"""

from __future__ import annotations

import concurrent.futures
import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2b import Sandbox

from runtime.jsexec.settings import JsSettings
from tests.helpers import (
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_command,
    tokens_setting,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

MIB = 1024 * 1024
ATTACK_SECONDS = 25
WATCHER_BYTES = 64 * 1024
LISTING_BYTES = 256 * 1024
UPLOAD_BYTES = 16 * MIB
E2B_TOKEN = "e2b_" + "d4" * 16
E2B_ORG = "org-hostile"

RSS_GROWTH_BOUND = 100 * MIB
"""What the attacks may add to the service's memory (its process tree's resident
set: the service, the egress proxy, the JS template and workers, about 300 MB
before): measured at +6 MB on the development machine (7,000 CONNECTs to unique
names, 4,000 files churned, listings and a talking port refused throughout)."""
METRICS_BOUND = 256 * 1024
"""/metrics after the flood: a few dozen KB (closed label sets), whatever the flood."""
NEIGHBOUR_FACTOR = 2.0
NEIGHBOUR_FLOOR_SECONDS = 1.0
"""The neighbour's p95 under attack: within twice its quiet p95, or a second over it.
Alone on a 2-core machine it stays a few tens of ms over (0.026 s quiet, 0.102 s under
attack); inside `make test`, two other workers run Docker tests beside it and ten
samples' p95 (their slowest) reached 1.13 s against 0.38 s quiet."""


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: Any) -> ServiceProcess:
    return start_service(
        "docker",
        SIESTA_TOKENS=tokens_setting(("e2b-hostile", E2B_TOKEN, ["sandbox"], E2B_ORG)),
        SIESTA_EGRESS__ALLOW="allowed.test",
        SIESTA_EGRESS__HOSTS=json.dumps({"allowed.test": "10.0.0.7"}),
        SIESTA_PROCESSES__MAX_WATCHER_BYTES=str(WATCHER_BYTES),
        SIESTA_FILES__MAX_LISTING_BYTES=str(LISTING_BYTES),
        SIESTA_E2B__MAX_UPLOAD_BYTES=str(UPLOAD_BYTES),
    )


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every descendant (the egress proxy, JS template)."""
    return sum(rss for _, rss in tree_processes(pid).values())


def tree_processes(pid: int) -> dict[int, tuple[str, int]]:
    """``pid`` and every descendant: pid -> (its command line, shortened; resident bytes)."""
    found: dict[int, tuple[str, int]] = {}
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text().splitlines()
            rss = sum(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
            command = Path(f"/proc/{current}/cmdline").read_bytes().replace(b"\0", b" ")
            found[current] = (command.decode(errors="replace")[:80], rss)
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def growth_by_process(before: dict[int, tuple[str, int]], peaks: dict[int, tuple[str, int]]) -> str:
    """Which processes grew (or came) most between ``before`` and their peaks: what a
    failed bound says, so that its cause is named."""
    deltas = [(rss - before.get(pid, ("", 0))[1], pid, cmd) for pid, (cmd, rss) in peaks.items()]
    grown = sorted(deltas, reverse=True)
    return "; ".join(
        f"{pid} {'(new) ' if pid not in before else ''}{command!r} +{delta / MIB:.0f} MB"
        for delta, pid, command in grown[:6]
    )


JS_PROCESSES = 1 + JsSettings().pool_size
"""The JavaScript template and its warm workers, forked from it (the same command)."""


def settled_rss(pid: int, timeout: float = 120.0) -> int:
    """``tree_rss`` once the service's warm JavaScript workers are all there and its
    resident bytes hold still for a second."""
    deadline, last = time.monotonic() + timeout, -1
    while time.monotonic() < deadline:
        if js_processes(pid) >= JS_PROCESSES:
            now = tree_rss(pid)
            if abs(now - last) < 2 * MIB:
                return now
            last = now
        time.sleep(1)
    msg = "the service's start-up work did not settle"
    raise AssertionError(msg)


def js_processes(pid: int) -> int:
    """Processes of ``pid``'s tree running the JavaScript template's command."""
    count, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            count += b"runtime.jsexec.zygote" in Path(f"/proc/{current}/cmdline").read_bytes()
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return count


EGRESS_FLOOD = r"""
proxy=${HTTPS_PROXY#*://}; cred=${proxy%@*}; hostport=${proxy##*@}; hostport=${hostport%%/*}
host=${hostport%:*}; port=${hostport##*:}; auth=$(printf %s "$cred" | base64 -w0)
pad=$(head -c 2000 /dev/zero | tr '\0' a); end=$((SECONDS + SECONDS_LEFT)); n=0
while [ $SECONDS -lt $end ]; do
  n=$((n + 1))
  exec 3<>/dev/tcp/$host/$port || break
  printf 'CONNECT %s-%s-%s.invalid:443 HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n' \
    "$pad" "$RANDOM" "$n" "$auth" >&3
  head -c 12 <&3 > /dev/null
  exec 3<&- 3>&-
done
echo "sent $n"
"""

WATCHED_CHURN = r"""
long=$(head -c 200 /dev/zero | tr '\0' d); dir=tree
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do dir=$dir/$long$i; done
mkdir -p "$dir"; end=$((SECONDS + SECONDS_LEFT)); n=0
while [ $SECONDS -lt $end ]; do
  n=$((n + 1)); f="$dir/$long-$n"; : > "$f"; mv "$f" "$f.moved"; rm -f "$f.moved"
done
echo "churned $n"
"""

TALKER = r"""
use IO::Socket::INET;
my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 8000, Listen => 16,
                              ReuseAddr => 1) or die;
$SIG{CHLD} = 'IGNORE'; $SIG{PIPE} = 'IGNORE';
while (my $c = $s->accept) {
  next if fork;
  my $chunk = 'x' x 65536;
  print $c $chunk while 1;  # talks first, and never stops
}
"""

SHADOW_FIND = "printf '#!/bin/sh\\nexec yes /mnt/work/shadowed-entry\\n' > /usr/local/bin/find \
&& chmod +x /usr/local/bin/find"


def test_a_hostile_sandbox_moves_nothing_in_the_control_plane(service: ServiceProcess) -> None:
    client = service.client
    neighbour = new_conversation()
    run_command(client, neighbour, "echo kept > note")
    quiet = [timed(lambda: run_command(client, neighbour, "cat note")) for _ in range(10)]

    flooder, watched, talker, shadowed = (new_conversation() for _ in range(4))
    for conversation in (flooder, watched, talker, shadowed):
        run_command(client, conversation, "true")
    watcher = client.post(
        f"/v1/conversations/{watched}/sandbox/fs/watchers",
        json={"path": ".", "recursive": True},
        headers=headers(),
    )
    assert watcher.status_code == 201, watcher.text
    shadow = run_command(client, shadowed, SHADOW_FIND)
    assert shadow["exitCode"] == 0, shadow
    client.post(
        f"/v1/conversations/{talker}/sandbox/processes",
        json={"command": f"perl -e '{TALKER}'"},
        headers=headers(),
    )
    port_token = client.get(
        f"/v1/conversations/{talker}/sandbox/ports/8000", headers=headers()
    ).json()["token"]

    # The service's own start-up work is done before the baseline: its OpenAPI
    # document is built in the background after start (api/openapi.py, warm), on a
    # busy machine well into this test: it adds about 110 MB (measured 118 -> 231 MB);
    # so are its warm JavaScript workers (runtime/jsexec/pool.py), started in the
    # background too, about 70 MB each. (Under a loaded full run the service has still
    # grown by 140 to 180 MB with this wait: a cause not found yet.)
    assert client.get("/openapi.json").status_code == 200
    rss_before = settled_rss(service.process.pid)
    processes_before = tree_processes(service.process.pid)
    peak = [rss_before]
    peaks: dict[int, tuple[str, int]] = {}
    stop = threading.Event()

    def sample_memory() -> None:
        while not stop.is_set():
            now = tree_processes(service.process.pid)
            peak.append(sum(rss for _, rss in now.values()))
            for pid, (command, rss) in now.items():
                if rss > peaks.get(pid, ("", 0))[1]:
                    peaks[pid] = (command, rss)
            time.sleep(0.25)

    script = f"SECONDS_LEFT={ATTACK_SECONDS}\n"
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        sampler = pool.submit(sample_memory)
        flood = pool.submit(run_command, client, flooder, script + EGRESS_FLOOD, timeoutSeconds=120)
        churn = pool.submit(
            run_command, client, watched, script + WATCHED_CHURN, timeoutSeconds=120
        )
        listings = pool.submit(repeat, lambda: list_folder(client, shadowed), ATTACK_SECONDS)
        reads = pool.submit(repeat, lambda: read_port(service, talker, port_token), ATTACK_SECONDS)
        uploads = pool.submit(upload_over_the_limit, service)
        time.sleep(3)  # into the attacks
        during = [timed(lambda: run_command(client, neighbour, "cat note")) for _ in range(10)]
        flooded, churned = flood.result(timeout=300), churn.result(timeout=300)
        listed, read = listings.result(timeout=300), reads.result(timeout=300)
        uploaded = uploads.result(timeout=300)
        stop.set()
        sampler.result()

    # the attacks ran
    assert flooded["stdout"].startswith("sent "), flooded
    assert int(flooded["stdout"].split()[1]) > 100
    assert int(churned["stdout"].split()[1]) > 100

    # every refusal names its limit
    others = [(status, text[:300]) for status, text in listed if status != 413]
    assert listed and not others, others[:3]
    assert all(str(LISTING_BYTES) in text or "20000" in text for _, text in listed)
    assert read and all(status in (200, 502) for status, _ in read), read[:3]
    assert uploaded == "refused naming the limit"
    changes = client.get(
        f"/v1/conversations/{watched}/sandbox/fs/watchers/{watcher.json()['id']}",
        headers=headers(),
    )
    assert changes.status_code == 200, changes.text
    kept = changes.json()
    assert kept["dropped"] > 0 and kept["limitBytes"] == WATCHER_BYTES

    # the control plane did not grow with what the sandboxes sent
    metrics = client.get("/metrics")
    assert len(metrics.content) < METRICS_BOUND, len(metrics.content)
    assert ".invalid" not in metrics.text
    growth = max(peak) - rss_before
    grown = growth_by_process(processes_before, peaks)
    assert growth < RSS_GROWTH_BOUND, f"the service grew by {growth / MIB:.0f} MB: {grown}"

    # and the neighbour kept working
    quiet_p95, during_p95 = p95(quiet), p95(during)
    print(  # the figures the bounds above were set from (pytest -s)
        f"sent {flooded['stdout'].split()[1]} CONNECTs, churned {churned['stdout'].split()[1]}"
        f" files, service +{growth / MIB:.0f} MB (from {rss_before / MIB:.0f} MB), /metrics"
        f" {len(metrics.content)} bytes, neighbour p95 {quiet_p95:.3f} s quiet,"
        f" {during_p95:.3f} s under attack"
    )
    bound = max(NEIGHBOUR_FACTOR * quiet_p95, quiet_p95 + NEIGHBOUR_FLOOR_SECONDS)
    assert during_p95 <= bound, f"neighbour p95 {during_p95:.2f} s, quiet {quiet_p95:.2f} s"
    assert run_command(client, neighbour, "cat note")["stdout"] == "kept\n"
    assert client.get("/healthz").status_code == 200


def list_folder(client: httpx.Client, conversation: str) -> tuple[int, str]:
    response = client.post(
        f"/v1/conversations/{conversation}/sandbox/fs/list", json={"path": "."}, headers=headers()
    )
    return response.status_code, response.text


def read_port(service: ServiceProcess, conversation: str, token: str) -> tuple[int, str]:
    """A client of the talking server that reads a little and leaves."""
    url = f"{service.base_url}/v1/conversations/{conversation}/ports/8000/"
    try:
        with httpx.stream("GET", url, headers={"X-Siesta-Port-Token": token}, timeout=10) as r:
            for _ in r.iter_bytes():
                break
            return r.status_code, ""
    except httpx.HTTPError as error:
        return 0, str(error)


def upload_over_the_limit(service: ServiceProcess) -> str:
    options: dict[str, Any] = {
        "api_key": E2B_TOKEN,
        "api_url": f"{service.base_url}/e2b",
        "sandbox_url": f"{service.base_url}/e2b/envd",
    }
    sandbox = Sandbox.create("base", **options)
    try:
        sandbox.files.write("fits.bin", b"f" * (UPLOAD_BYTES // 2))
        try:
            sandbox.files.write("too-big.bin", b"x" * (UPLOAD_BYTES * 3))
        except Exception as error:  # the SDK's own error class for a 413
            named = "SIESTA_E2B__MAX_UPLOAD_BYTES" in str(error) and str(UPLOAD_BYTES) in str(error)
            return "refused naming the limit" if named else str(error)
        return "accepted"
    finally:
        sandbox.kill()


def repeat(action: Callable[[], tuple[int, str]], seconds: float) -> list[tuple[int, str]]:
    outcomes = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        outcomes.append(action())
        time.sleep(0.5)
    return outcomes


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1]
