"""The agent's channel belongs to the service: nothing inside a sandbox reaches it.

The agent (PID 1) is not dumpable, so a sandbox process (root, without
CAP_SYS_PTRACE) can neither open the agent's descriptors (its stdin and stdout
are the channel) nor read its memory or environment nor ptrace it, while
commands themselves stay dumpable. Under gVisor the kernel's equivalent does
not guard ``/proc/<pid>/fd``: a write there costs the writer at most its own call
(counted as a protocol error), and the next call works. The agent's socket lets in
only relays the engine exec'd, under runc and gVisor.
"""

from __future__ import annotations

import json

import docker
import pytest

from runtime.providers.agent.protocol import FrameType
from tests.helpers import ServiceProcess, headers, new_conversation, run_command, sandbox_of

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PTRACE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
def attach(pid):
    request = 0x4206  # PTRACE_SEIZE: no stop, nothing to wait for
    result = libc.ptrace(request, pid, None, None)
    error = os.strerror(ctypes.get_errno()) if result else "attached"
    if result == 0:
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return error
pid = int(sys.argv[1]) if len(sys.argv) > 1 else 1
print(attach(pid))
"""


def protocol_errors(service: ServiceProcess) -> float:
    total = 0.0
    for line in service.client.get("/metrics").text.splitlines():
        if line.startswith("siesta_agent_protocol_errors_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def sh(service: ServiceProcess, conversation: str, script: str, image: str) -> str:
    """stdout, then stderr."""
    result = run_command(service.client, conversation, script, image=image)
    return str(result["stdout"] + result["stderr"])


@pytest.mark.parametrize("image", ["debian-base", "python"])
def test_writing_into_the_channel_is_refused_and_the_next_call_works(
    docker_service: ServiceProcess, image: str
) -> None:
    conversation = new_conversation()
    before = protocol_errors(docker_service)
    for fd in (0, 1, 2):
        out = sh(docker_service, conversation, f"printf garbage > /proc/1/fd/{fd}; echo $?", image)
        assert out.startswith("1\n") and f"/proc/1/fd/{fd}: Permission denied" in out, out
    out = sh(docker_service, conversation, "head -c 10 /proc/1/fd/0; echo $?", image)
    assert out.startswith("1\n") and "Permission denied" in out, out
    assert sh(docker_service, conversation, "echo fine", image) == "fine\n"
    assert protocol_errors(docker_service) == before


def test_the_agent_is_out_of_reach_but_commands_are_not(docker_service: ServiceProcess) -> None:
    conversation = new_conversation()

    def refused(script: str) -> None:
        out = sh(docker_service, conversation, script, "python")
        assert "Permission denied" in out or "Operation not permitted" in out, (script, out)
        assert "PATH=" not in out and "pipe:" not in out, (script, out)

    refused("ls -l /proc/1/fd")
    refused("cat /proc/1/environ")
    refused("cat /proc/1/mem")
    refused("cat /proc/1/maps")
    refused("ls /proc/1/root/")
    refused("readlink -v /proc/1/cwd /proc/1/exe")
    refused(f"python3 -c '{PTRACE}' 1")
    # Still readable, as for any process: what `ps` shows.
    assert sh(docker_service, conversation, "cat /proc/1/comm", "python") == "siesta-agent\n"
    # A command is the sandbox's own: dumpable again after its execve, so it can
    # read its own descriptors and debug its children.
    own = sh(docker_service, conversation, "ls -l /proc/self/fd/1", "python")
    assert "pipe:" in own, own
    child = sh(
        docker_service, conversation, f"sleep 30 & python3 -c '{PTRACE}' $!; kill $!", "python"
    )
    assert child == "attached\n", child


def test_signals_from_inside_leave_the_agent_answering(docker_service: ServiceProcess) -> None:
    conversation = new_conversation()
    script = "for s in STOP TERM INT HUP USR1 SEGV KILL; do kill -$s 1; done; sleep 0.5; echo sent"
    assert sh(docker_service, conversation, script, "debian-base") == "sent\n"
    assert sh(docker_service, conversation, "echo fine", "debian-base") == "fine\n"


RELAYS = (
    "for p in /proc/[0-9]*; do [ $p != /proc/1 ] && grep -qx 'PPid:\\s*0' $p/status"
    ' && [ "$(cat $p/comm)" = siesta-agent ] && echo ${p#/proc/}; done'
)
"""The pids of the agent's relays: the instance's channel (an engine exec, PPid 0)."""


def test_under_gvisor_a_write_into_the_channel_costs_at_most_the_writers_call(
    gvisor_service: ServiceProcess,
) -> None:
    """gVisor's ``/proc/<pid>/fd`` ignores dumpability, so a sandbox process may open
    the agent's and its relay's descriptors. Whatever it writes there reaches no
    instance as a frame: the attach is not the instance's channel any more, a write at
    the relay's output (gVisor's exec stream) is not seen (observed), and were it seen,
    the protocol check would end the writer's own call (``sandbox_unavailable``,
    counted). The next call works, the files as they were."""
    conversation = new_conversation()
    run_command(gvisor_service.client, conversation, "echo kept > note", image="python")
    relays = sh(gvisor_service, conversation, RELAYS, "python").split()
    assert len(relays) == 1, relays  # this instance's one channel
    before = protocol_errors(gvisor_service)
    garbage = "head -c 64 /dev/zero | tr '\\0' g"
    script = f"{garbage} > /proc/1/fd/1; {garbage} > /proc/{relays[0]}/fd/1; echo after"
    answer = gvisor_service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": script},
        headers=headers(image="python"),
    )
    body = answer.json()
    if answer.status_code == 200:
        assert body["stdout"] == "after\n", body
        # The attach, which the instance that made the sandbox holds as well, may have
        # read the garbage by now: counted, and that attach dropped.
        assert protocol_errors(gvisor_service) in (before, before + 1)
    else:
        assert body["error"]["code"] == "sandbox_unavailable", json.dumps(body)
        assert "broke the protocol" in body["error"]["message"]
        assert protocol_errors(gvisor_service) == before + 1
    result = run_command(gvisor_service.client, conversation, "cat note", image="python")
    assert (result["stdout"], result["workspaceReset"]) == ("kept\n", False)
    # ptrace and the agent's memory stay out of reach there too.
    out = sh(gvisor_service, conversation, "cat /proc/1/mem", "python")
    assert "Permission denied" in out, out
    assert sh(gvisor_service, conversation, f"python3 -c '{PTRACE}' 1", "python") != "attached\n"


def test_the_agent_cannot_be_replaced_from_inside(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    """Not under gVisor: ``runsc`` ignores the engine's read-only paths (docs/concepts/api.md)."""
    service = docker_service
    conversation = new_conversation()
    attempts = (
        "cp /bin/true /usr/local/lib/siesta/siesta-agent",
        "rm -f /usr/local/lib/siesta/siesta-fs",
        "mv /usr/local/lib/siesta /usr/local/lib/gone",
        "touch /usr/local/lib/siesta/new",
    )
    for attempt in attempts:
        result = run_command(service.client, conversation, attempt)
        assert result["exitCode"] != 0, (attempt, result)
    # The container starts again with the agent it was made with.
    docker_client.containers.get(sandbox_of(service, conversation)).restart(timeout=1)
    again = run_command(service.client, conversation, "echo still here")
    assert again["stdout"] == "still here\n"
    assert run_command(service.client, conversation, "true")["exitCode"] == 0


SOCKET_ATTACK = """
import os, socket, struct
def ask(creds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\\0siesta-agent")
    try:
        cred = (socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("3i", *creds))
        s.sendmsg([b"\\0"], [cred])
    except (BrokenPipeError, ConnectionResetError):  # closed at accept
        return "closed"
    except OSError as e:
        return "send: " + os.strerror(e.errno)
    s.settimeout(3)
    try:
        s.sendall(struct.pack("<IBQ", 9, %(ping)d, 7) + struct.pack("<IBQ", 9, %(list)d, 8))
        got = s.recv(64)
    except (BrokenPipeError, ConnectionResetError):  # closed, its frames unread
        return "closed"
    except OSError as e:
        return "recv: " + type(e).__name__
    return "answered" if got else "closed"
print("own:", ask((os.getpid(), os.getuid(), os.getgid())))
print("forged:", ask((1, 0, 0)))
"""


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_a_sandbox_process_cannot_open_a_channel_to_the_agent(
    request: pytest.FixtureRequest, runtime: str
) -> None:
    """The agent's socket lets in only relays the engine exec'd (PPid 0): a root
    process of the sandbox that connects and sends its credentials is closed before
    any frame is read, and one naming another pid (the agent's) is stopped by the
    kernel, under runc and gVisor alike."""
    service: ServiceProcess = request.getfixturevalue(
        "docker_service" if runtime == "runc" else "gvisor_service"
    )
    conversation = new_conversation()
    script = SOCKET_ATTACK % {"ping": FrameType.PING, "list": FrameType.LIST}
    out = sh(service, conversation, f"python3 -c '{script}'", "python")
    assert out == "own: closed\nforged: send: Operation not permitted\n", out
    assert sh(service, conversation, "echo fine", "python") == "fine\n"
