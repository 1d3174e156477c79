"""The stock ``e2b`` SDK (sync client), unmodified, against the service on Docker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import httpx
import pytest
from e2b import (
    AuthenticationException,
    CommandExitException,
    FileNotFoundException,
    InvalidArgumentException,
    NotFoundException,
    PtySize,
    Sandbox,
    SandboxException,
    SandboxNotFoundException,
    SandboxQuery,
    Template,
    TimeoutException,
)

from tests.e2b.conftest import ORG_A, TOKEN_A, TOKEN_B, TOKEN_TOOLS, E2bService
from tests.helpers import TOKEN
from tests.terminals import pty_until

pytestmark = [pytest.mark.docker]


@pytest.fixture
def sandbox(e2b: E2bService) -> Iterator[Sandbox]:
    made = Sandbox.create(
        "base", metadata={"test": "sync"}, envs={"GREETING": "hi"}, **e2b.options()
    )
    yield made
    Sandbox.kill(made.sandbox_id, **e2b.options())


def test_a_command_runs_as_the_user_in_its_home_with_the_sandboxes_environment(
    sandbox: Sandbox,
) -> None:
    result = sandbox.commands.run("whoami; pwd; echo $GREETING $ONE", envs={"ONE": "1"})
    assert result.stdout == "user\n/home/user\nhi 1\n"
    assert result.exit_code == 0

    as_root = sandbox.commands.run("whoami; pwd", user="root", cwd="/tmp")
    assert as_root.stdout == "root\n/tmp\n"
    # base lets its user become root as E2B's does (its catalog entry: allow_setuid).
    assert sandbox.commands.run("sudo -n id -u").stdout == "0\n"
    # E2B's base has `python` (examples run `python -m http.server`).
    assert sandbox.commands.run("python -c 'print(6 * 7)'").stdout == "42\n"
    sandbox.commands.run("mkdir work")
    assert sandbox.commands.run("pwd", cwd="work").stdout == "/home/user/work\n"
    assert sandbox.commands.run("pwd", cwd="~/work").stdout == "/home/user/work\n"


def test_a_failing_command_raises_with_its_exit_code_and_output(sandbox: Sandbox) -> None:
    with pytest.raises(CommandExitException) as failed:
        sandbox.commands.run("echo out; echo err >&2; exit 3")
    assert (failed.value.exit_code, failed.value.stdout, failed.value.stderr) == (
        3,
        "out\n",
        "err\n",
    )


def test_files_are_written_and_read_back_as_text_and_bytes(sandbox: Sandbox) -> None:
    info = sandbox.files.write("notes/a.txt", "héllo")
    assert (info.name, info.path) == ("a.txt", "/home/user/notes/a.txt")
    assert sandbox.files.read("notes/a.txt") == "héllo"
    assert sandbox.files.read("/home/user/notes/a.txt") == "héllo"

    payload = bytes(range(256)) * 4096  # 1 MiB, every byte value
    sandbox.files.write("/tmp/blob.bin", payload)
    assert bytes(sandbox.files.read("/tmp/blob.bin", format="bytes")) == payload
    # Written as the user: the user's own file, which its commands may change.
    owner = sandbox.commands.run("stat -c %U /tmp/blob.bin notes/a.txt").stdout
    assert owner == "user\nuser\n"

    many = sandbox.files.write_files(
        [{"path": "m/one.txt", "data": "1"}, {"path": "m/two.txt", "data": b"2"}]
    )
    assert [w.path for w in many] == ["/home/user/m/one.txt", "/home/user/m/two.txt"]
    assert sandbox.commands.run("cat m/one.txt m/two.txt").stdout == "12"


def test_file_errors_are_the_sdks_exceptions(sandbox: Sandbox) -> None:
    with pytest.raises(FileNotFoundException):
        sandbox.files.read("missing.txt")
    with pytest.raises(InvalidArgumentException):
        sandbox.files.read("/home/user")  # a folder
    with pytest.raises(SandboxException):
        sandbox.files.write("/etc/passwd", "x")  # not the user's to change
    assert "root:" in sandbox.files.read("/etc/passwd", user="root")


def test_a_background_process_outlives_its_call_and_takes_input(
    sandbox: Sandbox, e2b: E2bService
) -> None:
    ticker = sandbox.commands.run(
        "while :; do echo tick >> /tmp/ticks; sleep 0.1; done", background=True, timeout=0
    )
    ticker.disconnect()  # the call's stream ends; the process goes on
    echo = sandbox.commands.run("cat", background=True, stdin=True)
    assert {p.pid for p in sandbox.commands.list()} >= {ticker.pid, echo.pid}

    # Another client (the same sandbox, connected again) talks to it by pid.
    other = Sandbox.connect(sandbox.sandbox_id, **e2b.options())
    sandbox.commands.send_stdin(echo.pid, "hello\n")
    other.commands.close_stdin(echo.pid)
    assert echo.wait().stdout == "hello\n"

    first = int(sandbox.commands.run("wc -l < /tmp/ticks").stdout)
    time.sleep(0.5)
    assert int(sandbox.commands.run("wc -l < /tmp/ticks").stdout) > first
    assert other.commands.kill(ticker.pid) is True
    deadline = time.monotonic() + 10
    while ticker.pid in {p.pid for p in sandbox.commands.list()}:
        assert time.monotonic() < deadline, "a killed process is still listed"
        time.sleep(0.05)
    assert other.commands.kill(ticker.pid) is False  # gone: not found


def test_a_connected_reader_gets_the_output_from_then_on(sandbox: Sandbox) -> None:
    script = "echo before; while [ ! -f /tmp/go ]; do sleep 0.05; done; echo after; echo done"
    started = sandbox.commands.run(script, background=True)
    # Once the first reader has "before", the service has read it from the sandbox:
    # a reader connecting now comes after it (a file the script touches would not
    # say that: its output may still be on its way).
    first = next(stdout for stdout, _, _ in started if stdout is not None)
    assert first == "before\n"
    connected = sandbox.commands.connect(started.pid)
    sandbox.files.write("/tmp/go", "")
    seen: list[str] = []
    result = connected.wait(on_stdout=seen.append)
    assert result.exit_code == 0
    assert "".join(seen) == "after\ndone\n"  # nothing from before it connected
    assert started.wait().stdout == "before\nafter\ndone\n"  # the first reader got it all


def test_a_process_ends_at_its_timeout(sandbox: Sandbox) -> None:
    """The Start call's timeout bounds the process in the sandbox, not only the wait."""
    started = time.monotonic()
    with pytest.raises(TimeoutException):
        sandbox.commands.run("sleep 300", timeout=2)
    assert time.monotonic() - started < 10
    deadline = time.monotonic() + 10
    while sandbox.commands.list():
        assert time.monotonic() < deadline, "the process outlived its timeout"
        time.sleep(0.1)
    assert sandbox.commands.run("pgrep -x sleep || echo none").stdout == "none\n"


def test_info_list_timeout_and_kill(e2b: E2bService) -> None:
    first = Sandbox.create(
        "base", timeout=120, metadata={"kind": "list test", "n": "1"}, **e2b.options()
    )
    between = datetime.now()  # naive: local time, as the SDK documents
    time.sleep(0.05)
    second = Sandbox.create("base", metadata={"kind": "list test", "n": "2"}, **e2b.options())
    try:
        info = first.get_info()
        assert (info.sandbox_id, info.template_id, info.metadata) == (
            first.sandbox_id,
            "base",
            {"kind": "list test", "n": "1"},
        )
        assert round((info.end_at - info.started_at).total_seconds()) == 120
        assert info.state.value == "running"

        query = SandboxQuery(metadata={"kind": "list test"})
        paginator = Sandbox.list(query=query, limit=1, **e2b.options())
        pages = [paginator.next_items(), paginator.next_items()]
        assert not paginator.has_next
        assert sorted(s.sandbox_id for page in pages for s in page) == sorted(
            [first.sandbox_id, second.sandbox_id]
        )
        only = Sandbox.list(query=SandboxQuery(metadata={"n": "2"}), **e2b.options()).next_items()
        assert [s.sandbox_id for s in only] == [second.sandbox_id]
        later = SandboxQuery(metadata={"kind": "list test"}, started_after=between)
        after = Sandbox.list(query=later, **e2b.options()).next_items()
        assert [s.sandbox_id for s in after] == [second.sandbox_id]

        first.set_timeout(600)
        info = first.get_info()
        assert 590 < (info.end_at - info.started_at).total_seconds() < 700
    finally:
        assert Sandbox.kill(second.sandbox_id, **e2b.options()) is True
        first.kill()
    assert Sandbox.kill(second.sandbox_id, **e2b.options()) is False
    with pytest.raises(SandboxNotFoundException):
        Sandbox.get_info(first.sandbox_id, **e2b.options())
    assert first.is_running() is False
    with pytest.raises(SandboxException, match=r"not running|was not found"):
        first.commands.run("true")


def test_a_command_of_a_sandbox_killed_under_it_raises_what_e2b_raises(
    e2b: E2bService,
) -> None:
    sandbox = Sandbox.create("base", **e2b.options())
    command = sandbox.commands.run("sleep 60", background=True)
    sandbox.kill()
    # Not an exit code made up for it: the SDK asks the sandbox's health and says it is
    # gone, as against E2B.
    with pytest.raises(TimeoutException, match="killed or reached its end of life"):
        command.wait()


def test_a_sandbox_is_killed_when_its_timeout_passes(e2b: E2bService) -> None:
    sandbox = Sandbox.create("base", timeout=2, **e2b.options())
    ends = time.monotonic() + 2
    while sandbox.is_running():
        # Not running from its end on, whenever the sweep comes to kill it.
        assert time.monotonic() < ends + 0.5, "the sandbox outlived its timeout"
        time.sleep(0.1)
    deadline = time.monotonic() + 15
    while True:  # and then killed, by the sweep
        try:
            Sandbox.get_info(sandbox.sandbox_id, **e2b.options())
        except SandboxNotFoundException:
            break
        assert time.monotonic() < deadline, "the sandbox was not killed at its timeout"
        time.sleep(0.3)
    assert Sandbox.kill(sandbox.sandbox_id, **e2b.options()) is False
    conversation = httpx.get(
        f"{e2b.service.base_url}/v1/conversations/{sandbox.sandbox_id}/sandbox",
        headers={"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": ORG_A, "X-Siesta-User": "x"},
    )
    assert conversation.status_code == 404  # its session went with it


def test_an_e2b_sandbox_is_a_conversation_of_the_tokens_org(
    sandbox: Sandbox, e2b: E2bService
) -> None:
    sandbox.files.write("from-e2b.txt", "written through E2B")
    response = httpx.post(
        f"{e2b.service.base_url}/v1/conversations/{sandbox.sandbox_id}/sandbox/runCommand",
        headers={"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": ORG_A, "X-Siesta-User": "x"},
        json={"command": "cat /home/user/from-e2b.txt"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.json()["stdout"] == "written through E2B"
    assert response.json()["workspaceReset"] is False

    # Another org's token neither sees nor reaches it.
    with pytest.raises(SandboxNotFoundException):
        Sandbox.get_info(sandbox.sandbox_id, **e2b.options(TOKEN_B))
    assert Sandbox.kill(sandbox.sandbox_id, **e2b.options(TOKEN_B)) is False
    listed = Sandbox.list(**e2b.options(TOKEN_B)).next_items()
    assert sandbox.sandbox_id not in {s.sandbox_id for s in listed}
    assert sandbox.is_running()

    # Deleted as a conversation, it is gone for E2B too.
    deleted = httpx.delete(
        f"{e2b.service.base_url}/v1/conversations/{sandbox.sandbox_id}",
        headers={"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": ORG_A, "X-Siesta-User": "x"},
    )
    assert deleted.status_code == 200, deleted.text
    with pytest.raises(SandboxNotFoundException):
        Sandbox.get_info(sandbox.sandbox_id, **e2b.options())
    assert sandbox.is_running() is False


def test_templates_are_the_catalogs_and_unknown_routes_answer_e2bs_json(
    e2b: E2bService,
) -> None:
    options = {k: v for k, v in e2b.options().items() if k != "sandbox_url"}
    assert Template.exists("base", **options) is True
    assert Template.exists("no-such-template", **options) is False
    missing = httpx.get(f"{e2b.api_url}/no/such/route", headers={"X-API-Key": TOKEN_A})
    assert missing.status_code == 404
    assert missing.json()["code"] == 404


def test_refusals_are_the_sdks_exceptions(e2b: E2bService) -> None:
    with pytest.raises(SandboxException, match=r"404.*template 'nope' not found"):
        Sandbox.create("nope", **e2b.options())
    with pytest.raises(AuthenticationException):
        Sandbox.create("base", **e2b.options("e2b_" + "0" * 32))
    with pytest.raises(SandboxException, match=r"403.*sandbox"):
        Sandbox.create("base", **e2b.options(TOKEN_TOOLS))
    with pytest.raises(NotFoundException):
        Sandbox.connect("nosuchsandbox", **e2b.options())


def test_envd_checks_the_access_token_and_answers_in_e2bs_shape(
    sandbox: Sandbox, e2b: E2bService
) -> None:
    health = f"{e2b.sandbox_url}/health"
    ours = {"E2b-Sandbox-Id": sandbox.sandbox_id}
    good = httpx.get(health, headers={**ours, "X-Access-Token": sandbox._envd_access_token or ""})
    assert good.status_code == 204
    for token in ("", "wrong"):
        refused = httpx.get(health, headers={**ours, "X-Access-Token": token})
        assert refused.status_code == 401
        assert refused.json()["code"] == 401
    unknown = httpx.get(health, headers={"E2b-Sandbox-Id": "nosuchsandbox"})
    assert (unknown.status_code, unknown.json()["code"]) == (502, 502)
    assert "was not found" in unknown.json()["message"]


def test_folders_are_listed_made_moved_and_removed(sandbox: Sandbox) -> None:
    files = sandbox.files
    assert files.make_dir("project/src") is True
    assert files.make_dir("project/src") is False  # there already
    files.write("project/src/main.py", "print('hi')\n")
    files.write("project/README", "read me")

    top = files.list("project")
    assert [(e.name, e.type.value if e.type else None, e.path) for e in top] == [
        ("README", "file", "/home/user/project/README"),
        ("src", "dir", "/home/user/project/src"),
    ]
    deep = files.list("/home/user/project", depth=2)
    assert [e.path for e in deep] == [
        "/home/user/project/README",
        "/home/user/project/src",
        "/home/user/project/src/main.py",
    ]
    info = files.get_info("project/src/main.py")
    assert (info.size, info.owner, info.permissions) == (12, "user", "-rw-r--r--")
    assert info.modified_time.year >= 2026
    sandbox.commands.run("ln -s main.py project/src/link")
    link = files.get_info("project/src/link")
    assert link.symlink_target == "/home/user/project/src/main.py"  # absolute, as E2B's
    files.remove("project/src/link")

    moved = files.rename("project/src/main.py", "project/app/main.py")
    assert moved.path == "/home/user/project/app/main.py"
    assert files.exists("project/app/main.py") and not files.exists("project/src/main.py")

    files.remove("project")
    assert files.exists("project") is False
    with pytest.raises(FileNotFoundException):
        files.list("project")
    with pytest.raises(InvalidArgumentException):
        files.make_dir("/etc/passwd/x")


def test_a_watched_folder_reports_what_changes_in_it(sandbox: Sandbox) -> None:
    sandbox.files.make_dir("watched")
    handle = sandbox.files.watch_dir("watched", recursive=True)
    try:
        sandbox.files.write("watched/new.txt", "one")
        sandbox.commands.run("echo more >> watched/new.txt; mkdir watched/fresh")
        sandbox.commands.run("touch watched/fresh/x; chmod 600 watched/fresh/x")
        sandbox.commands.run("mv watched/new.txt watched/old.txt; rm watched/old.txt")
        seen: set[tuple[str, str]] = set()
        deadline = time.monotonic() + 10
        wanted = {
            ("create", "new.txt"),
            ("write", "new.txt"),
            ("create", "fresh"),
            ("create", "fresh/x"),  # in a folder made after the watch began
            ("chmod", "fresh/x"),
            ("rename", "new.txt"),
            ("create", "old.txt"),
            ("remove", "old.txt"),
        }
        while not wanted <= seen:
            assert time.monotonic() < deadline, f"saw only {seen}"
            seen |= {(e.type.value, e.name) for e in handle.get_new_events()}
            time.sleep(0.2)
    finally:
        handle.stop()


def test_a_write_is_seen_as_e2bs_is_create_chmod_write(sandbox: Sandbox) -> None:
    sandbox.files.make_dir("seen")
    handle = sandbox.files.watch_dir("seen")
    try:
        sandbox.files.write("seen/a.txt", "content")
        events: list[tuple[str, str]] = []
        deadline = time.monotonic() + 10
        while len(events) < 3:
            assert time.monotonic() < deadline, f"saw only {events}"
            events += [(e.type.value, e.name) for e in handle.get_new_events()]
            time.sleep(0.1)
        time.sleep(0.3)
        events += [(e.type.value, e.name) for e in handle.get_new_events()]
        assert events == [("create", "a.txt"), ("chmod", "a.txt"), ("write", "a.txt")]
    finally:
        handle.stop()


def test_a_sandbox_made_to_pause_is_paused_at_its_timeout_and_resumed_by_connect(
    e2b: E2bService,
) -> None:
    sandbox = Sandbox.create("base", timeout=2, lifecycle={"on_timeout": "pause"}, **e2b.options())
    try:
        sandbox.files.write("kept.txt", "still here")
        sandbox.commands.run("echo $$ > /tmp/pid; sleep 300", background=True, timeout=0)
        deadline = time.monotonic() + 15
        while Sandbox.get_info(sandbox.sandbox_id, **e2b.options()).state.value != "paused":
            assert time.monotonic() < deadline, "the sandbox was not paused at its timeout"
            time.sleep(0.3)
        assert sandbox.is_running() is False  # envd: "not running" until connected again

        resumed = Sandbox.connect(sandbox.sandbox_id, timeout=60, **e2b.options())
        assert resumed.get_info().state.value == "running"
        assert resumed.files.read("kept.txt") == "still here"
        # Paused, not stopped: the process it ran is there still.
        assert resumed.commands.run("kill -0 $(cat /tmp/pid) && echo alive").stdout == "alive\n"
    finally:
        Sandbox.kill(sandbox.sandbox_id, **e2b.options())


def test_a_terminal_is_typed_into_resized_and_ended(sandbox: Sandbox) -> None:
    # A 30 s stream deadline: a terminal that stays silent fails the test, not hangs it.
    terminal = sandbox.pty.create(PtySize(rows=24, cols=80), timeout=30)
    output = bytearray()

    def until(text: bytes) -> None:
        pty_until(terminal, output, text)

    sandbox.pty.send_stdin(terminal.pid, b"tty; stty size; echo typed-$((6*7))\n")
    until(b"typed-42")
    assert b"/dev/pts/" in output and b"24 80" in output
    sandbox.pty.resize(terminal.pid, PtySize(rows=50, cols=132))
    sandbox.pty.send_stdin(terminal.pid, b"stty size\n")
    until(b"50 132")
    assert sandbox.pty.kill(terminal.pid) is True


def test_a_create_retried_with_its_idempotency_key_makes_one_sandbox(e2b: E2bService) -> None:
    key = f"retry-{uuid.uuid4().hex}"
    with ThreadPoolExecutor(3) as pool:  # the first call and two retries, at once
        made = list(
            pool.map(
                lambda _: Sandbox.create("base", idempotency_key=key, **e2b.options()), range(3)
            )
        )
    try:
        assert len({sandbox.sandbox_id for sandbox in made}) == 1
        made[0].files.write("once.txt", "1")
        assert made[2].files.read("once.txt") == "1"
        other = Sandbox.create("base", idempotency_key=f"{key}-2", **e2b.options())
        assert other.sandbox_id != made[0].sandbox_id
        other.kill()
    finally:
        made[0].kill()
