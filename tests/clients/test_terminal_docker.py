"""The Python client's terminal on Docker: typed into, resized, interrupted, detached
and attached again, hung up by ``close``; refusals raised as the service's errors
(read from the refused handshake). Through several instances, and across an instance
stopping or dying: ``tests/fleet``."""

from __future__ import annotations

import time

import pytest

from siesta_client import Conversation, InvalidRequest, NotFound, SiestaClient, Unauthorized
from tests.helpers import TOKEN, ServiceProcess, new_conversation

pytestmark = [pytest.mark.docker]


def running(conversation: Conversation, pid: int) -> bool:
    return conversation.process(pid).running


def test_a_terminal_through_the_client(docker_service: ServiceProcess) -> None:
    with SiestaClient(docker_service.base_url, TOKEN) as siesta:
        conversation = siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        try:
            with conversation.open_terminal(cols=90, rows=20, cwd="/tmp") as terminal:
                assert terminal.read_until(":/tmp# ")  # its prompt (root)
                terminal.write("stty size; echo $((6*7))-$PWD-$TERM\n")
                shown = terminal.read_until("42-/tmp-xterm-256color")
                terminal.resize(120, 40)
                terminal.write(b"stty size\n")
                terminal.read_until("40 120")
                # the line runs once its echo prints (the typed line shows "$((1+1))")
                terminal.write("echo sleeping-$((1+1)); sleep 300; echo slept\n")
                terminal.read_until("sleeping-2")
                terminal.write("\x03")  # Ctrl-C: the sleep ends, the shell stays
                terminal.write("echo interrupted-$?\n")
                terminal.read_until("interrupted-130")
                terminal.detach()
            pid = terminal.pid
            assert running(conversation, pid)  # detached: it runs on

            with conversation.attach_terminal(pid, cols=120, rows=40) as again:
                screen = again.read_until("interrupted-130")  # its last screenful
                again.write("exit 5\n")
                while again.read(20):  # to its end: then b""
                    pass
            assert again.exit is not None and again.exit.exit_code == 5
            assert not running(conversation, pid)

            with conversation.open_terminal() as killed:
                killed.read_until("# ")
                killed.signal("SIGKILL")  # to its shell
                assert killed.read(20) == b""  # its end
            assert killed.exit is not None and killed.exit.exit_code == 137  # 128 + 9

            with conversation.open_terminal() as hung_up:
                hung_up.read_until("# ")
            deadline = time.monotonic() + 15
            while running(conversation, hung_up.pid):  # close() hangs it up
                assert time.monotonic() < deadline, "a closed terminal kept running"
                time.sleep(0.2)
        finally:
            conversation.delete()
    assert "20 90" in shown
    assert "interrupted-130" in screen and "40 120" in screen


def test_refusals_are_the_services_errors(docker_service: ServiceProcess) -> None:
    with SiestaClient(docker_service.base_url, TOKEN) as siesta:
        conversation = siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        other_org = siesta.conversation(conversation.id, org="org-b", user="user-1")
        try:
            plain = conversation.start_process("sleep 60")
            with pytest.raises(InvalidRequest) as not_a_terminal:
                conversation.attach_terminal(plain.pid)
            with conversation.open_terminal() as terminal:
                terminal.read_until("# ")
                with pytest.raises(NotFound):  # another org's conversation is not found
                    other_org.attach_terminal(terminal.pid)
                with pytest.raises(NotFound) as no_such:
                    conversation.attach_terminal(999999)
                terminal.write("echo still-mine\n")
                terminal.read_until("still-mine")
        finally:
            conversation.delete()
    stranger = SiestaClient(docker_service.base_url, "not-a-token")
    with stranger, pytest.raises(Unauthorized):
        stranger.conversation(conversation.id, org="org-a", user="user-1").open_terminal()
    assert not_a_terminal.value.code == "not_a_terminal"
    assert no_such.value.code == "process_not_found"
