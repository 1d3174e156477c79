"""Bad input gets a clear 4xx with a stable code, and nothing reaches Docker.

These run against a Docker-backed service; the module's last test checks that
none of the rejected calls created a container or a volume.
"""

from __future__ import annotations

from typing import Any

import docker
import pytest

from tests.helpers import (
    TOKEN,
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_resources,
)

pytestmark = pytest.mark.docker

CATALOG = """
images:
  - {id: debian-base, title: Debian, image: "siesta/debian-base:1"}
  - {id: retired, title: Old, image: "siesta/debian-base:1", enabled: false}
"""
COMMAND_LIMIT = 1000
BODY_LIMIT = 4096
BAD_ORG = "org-bad-input"


@pytest.fixture(scope="module")
def service(
    start_service: StartService,
    tmp_path_factory: pytest.TempPathFactory,
    docker_client: docker.DockerClient,
) -> ServiceProcess:
    catalog = tmp_path_factory.mktemp("catalog") / "catalog.yaml"
    catalog.write_text(CATALOG)
    return start_service(
        "docker",
        SIESTA_IMAGES__CATALOG_PATH=str(catalog),
        SIESTA_COMMAND__MAX_COMMAND_BYTES=str(COMMAND_LIMIT),
        SIESTA_HTTP__MAX_REQUEST_BYTES=str(BODY_LIMIT),
    )


def post_run(
    service: ServiceProcess,
    body: Any = None,
    *,
    conversation: str | None = None,
    hdrs: dict[str, str] | None = None,
    content: bytes | None = None,
) -> Any:
    url = f"/v1/conversations/{conversation or new_conversation()}/sandbox/runCommand"
    h = headers(org=BAD_ORG) if hdrs is None else hdrs
    if content is not None:
        return service.client.post(
            url, content=content, headers={**h, "Content-Type": "application/json"}
        )
    return service.client.post(url, json=body, headers=h)


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["message"]
    return error


def test_healthz_needs_no_auth(service: ServiceProcess) -> None:
    assert service.client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token", f"Basic {TOKEN}", "Bearer"],
    ids=["none", "wrong-token", "basic", "bearer-alone"],  # the same in every xdist worker
)
def test_requests_without_a_valid_token_get_401(
    service: ServiceProcess, authorization: str | None
) -> None:
    h = {k: v for k, v in headers(org=BAD_ORG).items() if k != "Authorization"}
    if authorization is not None:
        h["Authorization"] = authorization
    assert error_of(post_run(service, {"command": "true"}, hdrs=h), 401)["code"] == "unauthorized"
    assert error_of(service.client.get("/v1/images", headers=h), 401)["code"] == "unauthorized"


@pytest.mark.parametrize("drop", ["X-Siesta-Org", "X-Siesta-User"])
def test_conversation_routes_need_org_and_user(service: ServiceProcess, drop: str) -> None:
    h = {k: v for k, v in headers(org=BAD_ORG).items() if k != drop}
    error = error_of(post_run(service, {"command": "true"}, hdrs=h), 400)
    assert error["code"] == "missing_context"
    assert drop in error["message"]


@pytest.mark.parametrize("command", ["", "   \n\t"])
def test_empty_command(service: ServiceProcess, command: str) -> None:
    assert error_of(post_run(service, {"command": command}), 422)["code"] == "invalid_command"


def test_nul_byte_in_command(service: ServiceProcess) -> None:
    error = error_of(post_run(service, {"command": "echo a\u0000b"}), 422)
    assert error["code"] == "invalid_command"
    assert "NUL" in error["message"]


def test_oversized_command_states_the_limit(service: ServiceProcess) -> None:
    error = error_of(post_run(service, {"command": "x" * (COMMAND_LIMIT + 1)}), 422)
    assert error["code"] == "command_too_large"
    assert error["limit"] == COMMAND_LIMIT
    assert str(COMMAND_LIMIT) in error["message"]


def test_oversized_body_states_the_limit(service: ServiceProcess) -> None:
    error = error_of(post_run(service, {"command": "x" * (BODY_LIMIT * 2)}), 413)
    assert error["code"] == "request_too_large"
    assert error["limit"] == BODY_LIMIT


@pytest.mark.parametrize(
    "conversation",
    [
        "has space",
        "x" * 129,
        "semi;colon",
        "%C3%A9t%C3%A9",
        "dollar$",
    ],
)
def test_bad_conversation_ids(service: ServiceProcess, conversation: str) -> None:
    error = error_of(post_run(service, {"command": "true"}, conversation=conversation), 400)
    assert error["code"] == "invalid_conversation_id"


def test_a_slash_in_a_conversation_id_matches_no_route(service: ServiceProcess) -> None:
    response = post_run(service, {"command": "true"}, conversation="a%2F..%2Fb")
    assert error_of(response, 404)["code"] == "not_found"


def test_longest_allowed_conversation_id_is_accepted_by_validation(service: ServiceProcess) -> None:
    # 128 characters pass validation; the missing image stops it before Docker.
    response = post_run(
        service,
        {"command": "true"},
        conversation="a:b.c_d-" * 16,
        hdrs=headers(org=BAD_ORG, image=None),
    )
    assert error_of(response, 422)["code"] == "image_required"


def test_bad_org_header(service: ServiceProcess) -> None:
    response = post_run(service, {"command": "true"}, hdrs=headers(org="org/../other"))
    assert error_of(response, 400)["code"] == "invalid_context"


@pytest.mark.parametrize("content", [b"{not json", b"", b"[1, 2", b'{"command": "true",}'])
def test_bad_json(service: ServiceProcess, content: bytes) -> None:
    response = post_run(service, content=content)
    assert response.status_code in (400, 422), response.text
    assert response.json()["error"]["code"] in ("invalid_json", "invalid_request")


def test_unknown_fields_are_rejected(service: ServiceProcess) -> None:
    error = error_of(post_run(service, {"command": "true", "cwd": "/"}), 422)
    assert error["code"] == "invalid_request"
    assert error["problems"][0]["field"] == "cwd"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"command": 5},
        {"command": ["ls"]},
        {"command": "true", "timeoutSeconds": "soon"},
        {"command": "true", "timeoutSeconds": 1.5},
        [],
        "true",
    ],
)
def test_wrong_shapes_and_types(service: ServiceProcess, body: Any) -> None:
    assert error_of(post_run(service, body), 422)["code"] == "invalid_request"


@pytest.mark.parametrize("timeout", [0, -5])
def test_timeout_must_be_positive(service: ServiceProcess, timeout: int) -> None:
    response = post_run(service, {"command": "true", "timeoutSeconds": timeout})
    assert error_of(response, 422)["code"] == "invalid_request"


def test_provisioning_needs_an_image(service: ServiceProcess) -> None:
    response = post_run(service, {"command": "true"}, hdrs=headers(org=BAD_ORG, image=None))
    error = error_of(response, 422)
    assert error["code"] == "image_required"
    assert error["enabled"] == ["debian-base"]


@pytest.mark.parametrize("image", ["no-such-image", "retired", "siesta/debian-base:1"])
def test_provisioning_rejects_images_outside_the_enabled_catalog(
    service: ServiceProcess, image: str
) -> None:
    response = post_run(service, {"command": "true"}, hdrs=headers(org=BAD_ORG, image=image))
    error = error_of(response, 422)
    assert error["code"] == "image_not_in_catalog"
    assert error["imageId"] == image


def test_image_list_shows_only_enabled_images(service: ServiceProcess) -> None:
    body = service.client.get("/v1/images", headers=headers()).json()
    assert [image["id"] for image in body["images"]] == ["debian-base"]
    assert set(body["images"][0]) == {"id", "title", "description"}


@pytest.mark.parametrize(
    ("selection", "code"),
    [
        ({}, "image_required"),
        ({"baseImage": ""}, "image_required"),
        ({"baseImage": "retired"}, "image_not_in_catalog"),
        ({"baseImage": "nope"}, "image_not_in_catalog"),
    ],
)
def test_validating_an_agent_configuration(
    service: ServiceProcess, selection: dict[str, str], code: str
) -> None:
    response = service.client.post("/v1/images/validate", json=selection, headers=headers())
    assert error_of(response, 422)["code"] == code


def test_validating_a_good_selection(service: ServiceProcess) -> None:
    response = service.client.post(
        "/v1/images/validate", json={"baseImage": "debian-base"}, headers=headers()
    )
    assert response.json()["valid"] is True


def test_unknown_routes_and_functions_are_json_404s(service: ServiceProcess) -> None:
    url = f"/v1/conversations/{new_conversation()}/sandbox/formatDisk"
    response = service.client.post(url, json={}, headers=headers(org=BAD_ORG))
    assert error_of(response, 404)["code"] == "not_found"


def test_no_rejected_call_reached_docker(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    # Runs last in this module: everything above was refused before the provider.
    assert run_resources(docker_client, **{"siesta.org": BAD_ORG}) == ([], [])
