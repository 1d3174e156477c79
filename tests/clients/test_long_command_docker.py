"""A command longer than the client's read timeout (120 s) runs to its end through the
Python client, on Docker: answered as a whole by the sync client, and streamed by the
async one (issue 39). Both run at once, so the module takes one command's time."""

from __future__ import annotations

import asyncio
import threading

import pytest

from siesta_client import AsyncSiestaClient, SiestaClient
from siesta_client.client import DEFAULT_TIMEOUT
from tests.helpers import TOKEN, ServiceProcess, new_conversation

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SECONDS = 150
COMMAND = f"echo started; sleep {SECONDS}; echo done >> runs.txt; echo finished"


def test_a_command_longer_than_the_read_timeout_runs_to_its_end(
    docker_service: ServiceProcess,
) -> None:
    assert DEFAULT_TIMEOUT.read is not None and DEFAULT_TIMEOUT.read < SECONDS
    streamed: list[str] = []
    outcomes: dict[str, object] = {}

    def answered_whole() -> None:
        try:
            whole_call()
        except Exception as error:  # shown by the assertions below
            outcomes["whole"] = error

    def whole_call() -> None:
        with SiestaClient(docker_service.base_url, TOKEN) as siesta:
            conv = siesta.conversation(
                new_conversation(), org="org-a", user="user-1", base_image="debian-base"
            )
            outcomes["whole"] = conv.run_command(COMMAND, timeout_seconds=300)
            outcomes["whole-file"] = conv.read_file("runs.txt").content

    async def answered_streamed() -> None:
        async with AsyncSiestaClient(docker_service.base_url, TOKEN) as siesta:
            conv = siesta.conversation(
                new_conversation(), org="org-a", user="user-1", base_image="debian-base"
            )
            outcomes["streamed"] = await conv.run_command(
                COMMAND, timeout_seconds=300, on_stdout=streamed.append
            )
            outcomes["streamed-file"] = (await conv.read_file("runs.txt")).content

    whole = threading.Thread(target=answered_whole)
    whole.start()
    asyncio.run(answered_streamed())
    whole.join()
    for name in ("whole", "streamed"):
        result = outcomes[name]
        assert getattr(result, "exitCode", None) == 0, result
        assert getattr(result, "stdout", None) == "started\nfinished\n", result
        assert not getattr(result, "timedOut", True)
        assert outcomes[f"{name}-file"] == "done\n"
    assert "".join(streamed) == "started\nfinished\n"
