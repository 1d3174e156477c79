"""A sandbox's port through the service (issue 25).

    python -m bench.ports [--quick]      (and a step of ``python -m bench.suite``)

One conversation (image ``python``) runs ``python3 -m http.server`` on port 8000.

- Port round trip: a small ``GET`` (1 KiB file) through
  ``/v1/conversations/{id}/ports/8000/`` (one keep-alive client; each request is a new
  connection inside the sandbox: one ``siesta-fs connect`` process over the agent),
  beside the same ``GET`` from inside the sandbox (``urllib``, a new connection each
  time, timed in the sandbox): what reaching a port from outside adds.
- Resume on traffic: the sandbox paused (``POST .../sandbox/pause``), then the first
  ``GET`` through the port, beside a paused sandbox's first ``runCommand("true")``,
  taken in turns: a request to a port resumes as any call does.

Targets: the round trip's p50 within 10x the inside ``GET``'s plus 25 ms (a process
start in the sandbox and two HTTP hops are what it adds); the resume's p50 at most 1.5x
``runCommand``'s (the same resume, then a process start instead of a command).
"""

from __future__ import annotations

import json
import time
import uuid

from bench.common import Bench, median, percentile, run_alone, timed
from bench.measures import Figure
from tests.helpers import ServiceProcess

IMAGE = "python"
PORT = 8000
SMALL = 1024
WARM_UP = 5
INSIDE = """
import json, sys, time, urllib.request
times = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    with urllib.request.urlopen("http://127.0.0.1:8000/small.txt") as answer:
        assert len(answer.read()) == 1024
    times.append((time.perf_counter() - started) * 1000)
print(json.dumps(times))
"""


def measure(bench: Bench, service: ServiceProcess, n: int) -> list[Figure]:
    conversation = f"ports-{uuid.uuid4().hex[:6]}"
    headers = {**bench.headers(), "X-Siesta-Base-Image": IMAGE}
    client = service.client
    base = f"/v1/conversations/{conversation}"

    def call(route: str, body: object) -> dict[str, object]:
        response = client.post(f"{base}/sandbox/{route}", json=body, headers=headers)
        if response.status_code not in (200, 201):
            msg = f"{route} failed: {response.status_code} {response.text[:300]}"
            raise RuntimeError(msg)
        answer: dict[str, object] = response.json()
        return answer

    call("writeFile", {"path": "small.txt", "content": "x" * SMALL})
    call("writeFile", {"path": "inside.py", "content": INSIDE})
    call("processes", {"command": f"python3 -m http.server {PORT} --bind 127.0.0.1"})
    url = f"{base}/ports/{PORT}/small.txt"
    access = client.get(f"{base}/sandbox/ports/{PORT}", headers=headers).json()
    token = {"X-Siesta-Port-Token": access["token"]}

    def get() -> None:
        response = client.get(url, headers=token)
        if response.status_code != 200 or len(response.content) != SMALL:
            msg = f"GET through the port: {response.status_code} {response.text[:200]}"
            raise RuntimeError(msg)

    deadline = time.monotonic() + 30
    while client.get(url, headers=token).status_code == 502:
        if time.monotonic() > deadline:
            msg = "the server in the sandbox did not start listening"
            raise RuntimeError(msg)
        time.sleep(0.1)
    for _ in range(WARM_UP):
        get()
    through = [timed(get) for _ in range(n)]
    inside_run = call("runCommand", {"command": f"python3 inside.py {n}"})
    inside = json.loads(str(inside_run["stdout"]))
    figures = _round_trip(through, inside)

    def pause() -> None:
        response = client.post(f"{base}/sandbox/pause", json={}, headers=headers)
        if response.status_code != 200:
            msg = f"pause failed: {response.status_code} {response.text[:200]}"
            raise RuntimeError(msg)

    resumes, commands = [], []
    for i in range(max(5, n // 10)):
        for first_get in (i % 2 == 0, i % 2 == 1):
            pause()
            if first_get:
                resumes.append(timed(get))
            else:
                commands.append(timed(lambda: call("runCommand", {"command": "true"})))
    ratio = median(resumes) / median(commands)
    figures.append(
        Figure(
            "port: first GET to a paused sandbox (resume on traffic), p50",
            median(resumes),
            "ms",
            "a paused sandbox's first runCommand(true), p50",
            median(commands),
            "≤ 1.5x runCommand",
            ratio <= 1.5,
            f"x{ratio:.2f}; p95 {percentile(resumes, 0.95):.1f} ms; n {len(resumes)}",
        )
    )
    return figures


def _round_trip(through: list[float], inside: list[float]) -> list[Figure]:
    ours, theirs = median(through), median(inside)
    return [
        Figure(
            "port: small GET through the service (path form), p50",
            ours,
            "ms",
            "the same GET inside the sandbox (urllib), p50",
            theirs,
            "≤ 10x inside + 25 ms",
            ours <= 10 * theirs + 25,
            f"x{ours / theirs:.1f}, +{ours - theirs:.1f} ms; p95 "
            f"{percentile(through, 0.95):.1f} vs {percentile(inside, 0.95):.1f} ms; "
            f"n {len(through)}",
        )
    ]


def main() -> None:
    run_alone(
        __doc__.splitlines()[0],
        "the suite's quick sample count",
        lambda bench, service, quick: measure(bench, service, 20 if quick else 100),
        SIESTA_POOL__ENABLED="false",
    )


if __name__ == "__main__":
    main()
