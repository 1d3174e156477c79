"""The catalog changed while the service runs, across two service processes on one
Redis (fake provider): what an operator changes on one, the other applies at its next
call. Builds need Docker: tests/api/test_admin_images_docker.py."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from runtime.core.settings import LEGACY_TOKEN_NAME
from siesta_client import AsyncSiestaClient, SiestaClient
from siesta_client.errors import SiestaError
from tests.helpers import TOKEN, ServiceProcess, StartService, headers, run_cli
from tests.redis_server import RedisServer

pytestmark = pytest.mark.redis

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
CATALOG = """
images:
  - {id: debian-base, tag: "1", title: Base, image: "siesta/debian-base:1"}
  - {id: shipped, tag: "1", title: Shipped, image: "x/shipped:1", build: shipped}
"""


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    (folder / "shipped").mkdir()
    (folder / "shipped" / "Dockerfile").write_text("FROM siesta/debian-base:1\n")
    path = folder / "catalog.yaml"
    path.write_text(CATALOG)
    return path


@pytest.fixture(scope="module")
def pair(
    start_service: StartService, redis_server: RedisServer, catalog_file: Path
) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    url = redis_server.url.rsplit("/", 1)[0] + "/6"  # this module's own database
    with redis.Redis.from_url(url) as connection:
        connection.flushdb()
    env = {"SIESTA_STORE__URL": url, "SIESTA_IMAGES__CATALOG_PATH": str(catalog_file)}
    yield start_service("fake", **env), start_service("fake", **env)


def add(service: ServiceProcess, **body: Any) -> dict[str, Any]:
    made = service.client.post("/v1/admin/images", headers=ADMIN, json=body)
    assert made.status_code == 201, made.text
    answer: dict[str, Any] = made.json()
    return answer


def state(service: ServiceProcess, ref: str, new: str) -> Any:
    return service.client.post(f"/v1/admin/images/{ref}/state", headers=ADMIN, json={"state": new})


def run(service: ServiceProcess, conversation: str, image: str) -> Any:
    return service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        headers=headers(image=image),
        json={"command": "true"},
    )


def selectable(service: ServiceProcess) -> list[str]:
    return [i["id"] for i in service.client.get("/v1/images", headers=ADMIN).json()["images"]]


def test_the_yaml_file_seeds_the_store_once_for_every_instance(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    one, two = pair
    listed = [
        (i["ref"], i["state"], i["default"])
        for i in two.client.get("/v1/admin/images", headers=ADMIN).json()["images"]
    ]
    assert ("debian-base:1", "enabled", True) in listed
    assert ("shipped:1", "enabled", True) in listed
    assert listed == [
        (i["ref"], i["state"], i["default"])
        for i in one.client.get("/v1/admin/images", headers=ADMIN).json()["images"]
    ]


def test_a_version_added_and_enabled_on_one_instance_serves_on_the_other(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    one, two = pair
    added = add(one, id="tools", tag="1", title="Tools", image="siesta/debian-base:1", build=False)
    assert added["image"]["state"] == "disabled" and added["build"] is None
    assert added["image"]["default"] is True  # its id's first version
    refused = run(two, "c-tools-early", "tools")
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "image_not_in_catalog"
    assert "tools" not in selectable(two)

    assert state(one, "tools:1", "enabled").status_code == 200
    assert "tools" in selectable(two)
    ran = run(two, "c-tools", "tools")
    assert ran.status_code == 200, ran.text
    sandbox = two.client.get("/v1/conversations/c-tools/sandbox", headers=headers()).json()
    assert (sandbox["imageId"], sandbox["imageTag"]) == ("tools", "1")
    # The OpenAPI document's enum follows the catalog, on both.
    for service in pair:
        document = service.client.get("/openapi.json").json()
        enum = document["components"]["schemas"]["ImageSelection"]["properties"]["baseImage"]
        assert {"tools", "tools:1"} <= set(enum["enum"])


def test_a_new_default_tag_applies_to_new_conversations_and_the_old_keep_theirs(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    one, two = pair
    add(one, id="stack", tag="1", title="Stack 1", image="siesta/debian-base:1", build=False)
    state(one, "stack:1", "enabled")
    assert run(two, "c-stack-old", "stack").status_code == 200
    add(one, id="stack", tag="2", title="Stack 2", image="siesta/python:1", build=False)
    state(one, "stack:2", "enabled")
    assert set(selectable(two)) >= {"stack", "stack:2"}
    made = one.client.post("/v1/admin/images/stack:2/default", headers=ADMIN)
    assert made.status_code == 200 and made.json()["default"] is True
    valid = two.client.post("/v1/images/validate", headers=ADMIN, json={"baseImage": "stack"})
    assert valid.json()["image"]["title"] == "Stack 2"
    assert run(two, "c-stack-new", "stack").status_code == 200
    tags = {
        c: two.client.get(f"/v1/conversations/{c}/sandbox", headers=headers()).json()["imageTag"]
        for c in ("c-stack-old", "c-stack-new")
    }
    assert tags == {"c-stack-old": "1", "c-stack-new": "2"}
    detail = one.client.get("/v1/admin/images/stack:1", headers=ADMIN).json()
    assert [s["conversationId"] for s in detail["sessions"]] == ["c-stack-old"]


def test_a_retired_version_refuses_new_sessions_and_keeps_the_ones_it_has(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    one, two = pair
    add(one, id="legacy", tag="1", title="Legacy", image="siesta/debian-base:1", build=False)
    state(one, "legacy:1", "enabled")
    assert run(two, "c-legacy", "legacy").status_code == 200

    retired = state(one, "legacy:1", "retired")
    assert retired.status_code == 200 and retired.json()["state"] == "retired"
    assert retired.json()["sessionCount"] == 1
    refused = run(two, "c-legacy-new", "legacy")
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "image_retired" and "retired" in error["message"]
    assert "legacy" not in error["enabled"]
    assert run(two, "c-legacy", "legacy").status_code == 200  # the session it had goes on
    detail = two.client.get("/v1/admin/images/legacy:1", headers=ADMIN).json()
    assert [s["conversationId"] for s in detail["sessions"]] == ["c-legacy"]
    for again in ("enabled", "disabled"):
        conflict = state(two, "legacy:1", again)
        assert conflict.status_code == 409
        assert conflict.json()["error"]["code"] == "catalog_image_state_conflict"
    assert two.client.post("/v1/admin/images/legacy:1/builds", headers=ADMIN).status_code == 409
    assert two.client.post("/v1/admin/images/legacy:1/default", headers=ADMIN).status_code == 409


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"id": "debian-base", "tag": "1", "title": "Again"}, 409, "catalog_image_exists"),
        (
            {"id": "ctx", "title": "C", "source": {"context": "absent"}},
            404,
            "catalog_image_not_found",
        ),
        ({"id": "Bad Id", "title": "B"}, 422, "invalid_request"),
        (
            {"id": "big", "title": "B", "source": {"dockerfile": "x" * 65537}},
            422,
            "invalid_request",
        ),
        (
            {"id": "both", "title": "B", "source": {"dockerfile": "FROM x", "context": "shipped"}},
            422,
            "invalid_request",
        ),
    ],
)
def test_bad_additions_are_refused_with_their_reason(
    pair: tuple[ServiceProcess, ServiceProcess], body: dict[str, Any], status: int, code: str
) -> None:
    answer = pair[0].client.post("/v1/admin/images", headers=ADMIN, json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code


def test_unknown_versions_and_builds_are_404(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    client = pair[0].client
    for url in ("/v1/admin/images/absent", "/v1/admin/image-builds/" + "0" * 32):
        answer = client.get(url, headers=ADMIN)
        assert answer.status_code == 404, answer.text
    assert state(pair[0], "absent:1", "enabled").status_code == 404
    assert client.get("/v1/admin/images/a:b:c", headers=ADMIN).status_code == 422


def test_a_build_where_the_provider_builds_nothing_fails_on_record(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    one, two = pair
    started = one.client.post("/v1/admin/images/shipped:1/builds", headers=ADMIN)
    assert started.status_code == 202 and started.json()["state"] == "running"
    build_id = started.json()["buildId"]
    with two.client.stream(
        "GET", f"/v1/admin/image-builds/{build_id}/events", headers=ADMIN
    ) as events:
        text = "".join(events.iter_text())
    assert "event: log" in text and "event: done" in text
    done = two.client.get(f"/v1/admin/image-builds/{build_id}", headers=ADMIN).json()
    assert done["state"] == "failed" and "builds no images" in done["error"]
    assert any("builds no images" in line for line in done["log"])
    image = one.client.get("/v1/admin/images/shipped:1", headers=ADMIN).json()
    assert image["lastBuild"]["buildId"] == build_id and image["digest"] is None


def test_reimporting_the_file_applies_it_and_a_retired_version_stays_retired(
    pair: tuple[ServiceProcess, ServiceProcess], catalog_file: Path
) -> None:
    one, two = pair
    state(one, "shipped:1", "retired")
    catalog_file.write_text(
        CATALOG.replace("title: Shipped", "title: Shipped again")
        + '  - {id: later, tag: "3", title: Later, image: "x/later:3"}\n'
    )
    try:
        imported = two.client.post("/v1/admin/image-imports", headers=ADMIN)
    finally:
        catalog_file.write_text(CATALOG)
    assert imported.status_code == 200, imported.text
    assert imported.json() == {"added": ["later:3"], "updated": ["debian-base:1", "shipped:1"]}
    shipped = one.client.get("/v1/admin/images/shipped:1", headers=ADMIN).json()
    assert (shipped["title"], shipped["state"]) == ("Shipped again", "retired")
    assert "later" in selectable(one)


def test_every_change_is_in_the_audit_trail_with_who_and_from_where(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    one, two = pair
    add(one, id="audited", tag="1", title="A", image="siesta/debian-base:1", build=False)
    state(one, "audited:1", "enabled")
    state(one, "audited:1", "retired")
    page = two.client.get("/v1/admin/audit", headers=ADMIN, params={"target": "audited:1"}).json()
    actions = [e["action"] for e in page["entries"]]
    assert actions == ["image.retire", "image.enable", "image.add"]  # newest first
    newest = page["entries"][0]
    assert (newest["actor"], newest["via"], newest["source"]) == (
        LEGACY_TOKEN_NAME,
        "api",
        "127.0.0.1",
    )
    assert abs(newest["at"] - time.time()) < 60
    first = two.client.get(
        "/v1/admin/audit", headers=ADMIN, params={"action": "image.", "limit": 2}
    ).json()
    assert len(first["entries"]) == 2 and first["next"] is not None
    older = two.client.get(
        "/v1/admin/audit",
        headers=ADMIN,
        params={"action": "image.", "limit": 2, "before": first["next"]},
    ).json()
    assert older["entries"] and older["entries"][0]["at"] < first["entries"][-1]["at"]


def test_the_command_line_import_reaches_the_running_instances(
    pair: tuple[ServiceProcess, ServiceProcess], catalog_file: Path
) -> None:
    one, _ = pair
    catalog_file.write_text(CATALOG + '  - {id: from-cli, tag: "1", title: CLI, image: "x/c:1"}\n')
    try:
        done = run_cli(
            "images", "import", env={**os.environ, **one.env, "SIESTA_DATA_DIR": str(one.data_dir)}
        )
    finally:
        catalog_file.write_text(CATALOG)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == ["from-cli:1"]
    assert "from-cli" in selectable(one)
    trail = one.client.get(
        "/v1/admin/audit", headers=ADMIN, params={"action": "image.import", "limit": 1}
    ).json()["entries"]
    assert trail[0]["via"] == "cli" and trail[0]["actor"].startswith("cli:")


def test_the_python_client_drives_the_catalog_and_reads_the_audit_trail(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    one, two = pair
    with SiestaClient(one.base_url, TOKEN) as siesta:
        answer = siesta.admin.add_image(
            {"id": "client", "tag": "1", "title": "Client", "source": {"dockerfile": "FROM x\n"}}
        )
        assert answer.image.state == "disabled" and answer.build is not None
        done = siesta.admin.wait_for_build(answer.build.buildId, timeout=60)
        # The fake provider builds nothing: the build fails, and says why.
        assert done.state == "failed" and done.log and "builds no images" in done.log[-1]
        assert siesta.admin.set_state("client:1", "enabled").state == "enabled"
        with pytest.raises(SiestaError) as caught:
            siesta.admin.set_state("absent:1", "enabled")
        assert caught.value.code == "catalog_image_not_found"

    async def read_from_the_other() -> tuple[str, list[str]]:
        async with AsyncSiestaClient(two.base_url, TOKEN) as siesta:
            detail = await siesta.admin.image("client")
            page = await siesta.admin.audit(target="client:1")
            return detail.state, [e.action for e in page.entries]

    state, actions = asyncio.run(read_from_the_other())
    assert (state, actions) == ("enabled", ["image.enable", "image.build", "image.add"])
