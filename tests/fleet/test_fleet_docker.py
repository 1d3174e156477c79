"""One fleet, any replica: three instances behind a proxy that sends every request to
the next one (``conftest.py``). What a user does through it must work whichever
instance each request lands on."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from e2b import CommandExitException, PtySize, Sandbox

from siesta_contract.processes import ProcessPublic

from siesta_client import SiestaClient
from tests.fleet.conftest import E2B_ORG, INSTANCES, Fleet
from tests.helpers import TOKEN, headers, new_conversation
from tests.terminals import pty_until

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]


def test_a_conversation_is_served_by_every_instance_in_turn(fleet: Fleet) -> None:
    conversation = new_conversation()
    route = f"/v1/conversations/{conversation}/sandbox/runCommand"
    with fleet.client() as client:
        answers = [
            client.post(
                route,
                json={"command": f"echo {n} >> turns.txt; cat turns.txt | wc -l"},
                headers=headers(),
            )
            for n in range(INSTANCES * 2)
        ]
        client.delete(f"/v1/conversations/{conversation}", headers=headers())
    assert [a.status_code for a in answers] == [200] * len(answers), answers[-1].text
    assert [a.json()["stdout"] for a in answers] == [f"{n + 1}\n" for n in range(len(answers))]
    assert fleet.proxy.instances_of(route) == set(range(INSTANCES))


def test_the_e2b_sdk_runs_commands_and_files_through_any_instance(fleet: Fleet) -> None:
    sandbox = Sandbox.create("base", **fleet.e2b_options())
    try:
        sandbox.files.write("notes/todo.txt", "ship it")
        listed = [entry.name for entry in sandbox.files.list("notes")]
        ran = [sandbox.commands.run(f"echo {n} >> runs.txt && wc -l < runs.txt") for n in range(3)]
        read = sandbox.files.read("notes/todo.txt")
        connected = Sandbox.connect(sandbox.sandbox_id, **fleet.e2b_options())
        same = connected.commands.run("cat notes/todo.txt").stdout
    finally:
        sandbox.kill()
    assert listed == ["todo.txt"] and read == "ship it" and same == "ship it"
    assert [result.stdout for result in ran] == ["1\n", "2\n", "3\n"]
    assert fleet.proxy.instances_of("/e2b/envd/") == set(range(INSTANCES))


def test_an_e2b_background_command_is_served_by_any_instance(fleet: Fleet) -> None:
    """Started through one instance; connected to, fed, listed and killed through the
    others (each SDK call lands on the next instance)."""
    sandbox = Sandbox.create("base", **fleet.e2b_options())
    try:
        handle = sandbox.commands.run(
            "while read line; do echo got $line; done", background=True, stdin=True, timeout=0
        )
        listed = [process.pid for process in sandbox.commands.list()]
        sandbox.commands.send_stdin(handle.pid, "one\n")
        connected = sandbox.commands.connect(handle.pid)
        sandbox.commands.send_stdin(handle.pid, "two\n")
        again = [
            process.pid
            for process in Sandbox.connect(
                sandbox.sandbox_id, **fleet.e2b_options()
            ).commands.list()
        ]
        killed = sandbox.commands.kill(handle.pid)
        with pytest.raises(CommandExitException) as ended:  # killed: the wait says so
            connected.wait()
        after = [process.pid for process in sandbox.commands.list()]
    finally:
        sandbox.kill()
    assert handle.pid in listed and handle.pid in again
    assert killed is True
    assert "got two\n" in ended.value.stdout  # typed on one instance, read on another
    assert handle.pid not in after
    served = fleet.proxy.instances_of("/e2b/envd/process.Process/")
    assert served == set(range(INSTANCES))


def test_a_v1_process_and_a_terminal_are_served_by_any_instance(fleet: Fleet) -> None:
    """The Python client's processes and terminals: started through one instance, then
    listed, read, fed, resized, re-attached and ended through the others."""
    siesta = SiestaClient(fleet.url, TOKEN)
    conversation = siesta.conversation(
        new_conversation(), org="org-a", user="user-1", base_image="debian-base"
    )
    try:
        started = conversation.start_process(
            "echo ready; while read line; do echo got $line; done", stdin=True, tag="echo"
        )
        listed = [p.pid for p in conversation.processes().processes]
        conversation.send_input(started.pid, "one\n")
        recent = _until(lambda: conversation.process(started.pid), "got one")
        conversation.signal_process(started.pid, "SIGKILL")
        ended = _until_ended(lambda: conversation.process(started.pid))

        with conversation.open_terminal(cols=80, rows=24) as terminal:
            terminal.write("echo $((6*7))-first; stty size\n")
            terminal.read_until("24 80")
            terminal.detach()
        # The next instance: it never saw this terminal start.
        with conversation.attach_terminal(terminal.pid, cols=100, rows=30) as again:
            shown = again.read_until("42-first")  # the last screenful, shown again
            again.write("stty size\n")
            again.read_until("30 100")
            again.resize(120, 40)
            again.write("stty size; exit 3\n")
            again.read_until("40 120")
            while again.read(20):  # to its end
                pass
            exited = again.exit
    finally:
        conversation.delete()
        siesta.close()
    assert started.pid in listed
    assert recent.recent["stdout"].startswith("ready\n") and ended.exitCode == 137  # 128 + 9
    assert "42-first" in shown
    assert exited is not None and exited.exit_code == 3
    processes_route = f"/v1/conversations/{conversation.id}/sandbox/processes"
    assert len(fleet.proxy.instances_of(processes_route)) == INSTANCES
    terminal_route = f"/v1/conversations/{conversation.id}/sandbox/terminal"
    assert len(fleet.proxy.instances_of(terminal_route)) == 2


def _until(read: Callable[[], ProcessPublic], text: str) -> ProcessPublic:
    deadline = time.monotonic() + 20
    while True:
        process = read()
        if text in process.recent.get("stdout", ""):
            return process
        assert time.monotonic() < deadline, process
        time.sleep(0.1)


def _until_ended(read: Callable[[], ProcessPublic]) -> ProcessPublic:
    deadline = time.monotonic() + 20
    while True:
        process = read()
        if not process.running:
            return process
        assert time.monotonic() < deadline, process
        time.sleep(0.1)


def test_watchers_and_ports_are_served_by_any_instance(fleet: Fleet) -> None:
    """An E2B watcher made through one instance, its events read through the others,
    each once; a /v1 watcher likewise; a port the sandbox serves, reached through all."""
    sandbox = Sandbox.create("base", **fleet.e2b_options())
    try:
        sandbox.files.make_dir("watched")
        handle = sandbox.files.watch_dir("watched")
        sandbox.files.write("watched/a.txt", "one")
        seen = _events_until(handle, {("create", "a.txt"), ("write", "a.txt")})
        sandbox.commands.run("echo two > watched/b.txt")
        later = _events_until(handle, {("create", "b.txt")})
        handle.stop()

        sandbox.files.write("site/hello.txt", "hello from the sandbox")
        sandbox.commands.run("cd site && python3 -m http.server 8000", background=True, timeout=0)
        host = sandbox.get_host(8000)
        with fleet.client() as client:
            pages = [_page(client, host) for _ in range(INSTANCES)]

        # The same sandbox as a conversation of the E2B token's org and user (its name).
        siesta = SiestaClient(fleet.url, TOKEN)
        same = siesta.conversation(sandbox.sandbox_id, org=E2B_ORG, user="e2b-fleet")
        watcher = same.watch("/home/user/watched").id
        sandbox.commands.run("touch watched/c.txt")
        reads = [same.changes(watcher, wait_seconds=wait) for wait in (5, 0, 0)]
        same.stop_watching(watcher)
        siesta.close()
    finally:
        sandbox.kill()
    assert {("create", "a.txt"), ("write", "a.txt")} <= seen
    assert ("create", "a.txt") not in later  # read once, whichever instance read it
    assert pages == ["hello from the sandbox"] * INSTANCES
    changes = [(c.type, c.name) for read in reads for c in read.changes]
    assert changes.count(("create", "c.txt")) == 1, reads  # read once, by one instance
    watchers = f"/v1/conversations/{sandbox.sandbox_id}/sandbox/fs/watchers/{watcher}"
    assert len(fleet.proxy.instances_of(watchers)) == INSTANCES
    assert len(fleet.proxy.instances_of("/e2b/envd/filesystem.Filesystem/GetWatcherEvents")) > 1


def _events_until(handle: Any, wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    deadline = time.monotonic() + 15
    while not wanted <= seen:
        assert time.monotonic() < deadline, f"saw only {seen}"
        seen |= {(event.type.value, event.name) for event in handle.get_new_events()}
        time.sleep(0.2)
    return seen


def _page(client: httpx.Client, host: str) -> str:
    deadline = time.monotonic() + 30
    while (answer := client.get("/hello.txt", headers={"Host": host})).status_code == 502:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.1)
    return answer.text


def test_an_e2b_terminal_is_served_by_any_instance(fleet: Fleet) -> None:
    """``pty`` created through one instance, typed into, resized and killed through the
    others; its output stream stays on the instance that created it."""
    sandbox = Sandbox.create("base", **fleet.e2b_options())
    try:
        terminal = sandbox.pty.create(PtySize(rows=24, cols=80), timeout=30)
        output = bytearray()

        def until(text: bytes) -> None:
            pty_until(terminal, output, text)

        sandbox.pty.send_stdin(terminal.pid, b"stty size; echo typed-$((6*7))\n")
        until(b"typed-42")
        sandbox.pty.resize(terminal.pid, PtySize(rows=50, cols=132))
        sandbox.pty.send_stdin(terminal.pid, b"stty size\n")
        until(b"50 132")
        killed = sandbox.pty.kill(terminal.pid)
    finally:
        sandbox.kill()
    assert b"24 80" in output and killed is True
    envd = fleet.proxy.instances_of("/e2b/envd/process.Process/")
    assert len(envd) == INSTANCES
