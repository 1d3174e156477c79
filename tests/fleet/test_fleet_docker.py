"""One fleet, any replica: three instances behind a proxy that sends every request to
the next one (``conftest.py``). What a user does through it must work whichever
instance each request lands on."""

from __future__ import annotations

import pytest
from e2b import Sandbox

from tests.fleet.conftest import INSTANCES, Fleet
from tests.helpers import headers, new_conversation

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
