"""The console in a real browser (Playwright driving Debian's chromium) against a real
service on Docker: sign in, a sandbox appears after a ``runCommand`` and shows its
image and executions, a held call is approved, a sandbox is suspended, resumed and
deleted (each confirmed), an image is added and rebuilt with its build's log streamed
into the page, then retired (a new conversation on it is refused), the audit trail
shows it all, and signing out ends the session. Screenshots of every page
at 1280 and 390 px wide are kept in ``test-artifacts/console/`` (``SIESTA_TEST_ARTIFACTS``
moves them); at 390 px no page is wider than the screen.

The tests run in order, one service and one browser for the module: each goes on
from the state the one before left.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from runtime.images.build import SANDBOX_IMAGE_LABEL
from tests.console.helpers import ADMIN, ADMIN_TOKEN, CONSOLE_TOKENS
from tests.helpers import REPO, TOKEN, ServiceProcess, StartService, new_conversation, run_command

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ORG = "org-console"
CONVERSATION = new_conversation()
AGENT: dict[str, Any] = {
    "id": "agent-1",
    "systemToolIds": ["sandbox"],
    "baseImage": "debian-base",
    "functionPolicies": {"runCommand": "confirm"},
}
ARTIFACTS = Path(os.environ.get("SIESTA_TEST_ARTIFACTS") or REPO / "test-artifacts") / "console"
WIDTHS = {"wide": (1280, 900), "narrow": (390, 844)}
TIMEOUT_MS = 15_000
IMAGE = f"console-{uuid.uuid4().hex[:8]}"
"""The version the image tests add (``IMAGE:1``), removed from the engine afterwards."""
SLOW_BUILD = "FROM siesta/debian-base:1\nRUN sleep 2 && date +%s%N > /etc/console-build\n"
"""Two seconds of build: the page is open while it runs, so its log must stream in."""
BUILD_MS = 120_000


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    return start_service("docker", SIESTA_TOKENS=CONSOLE_TOKENS)


@pytest.fixture(scope="module", autouse=True)
def _remove_the_built_image(docker_client: docker.DockerClient) -> Iterator[None]:
    yield
    label = f"{SANDBOX_IMAGE_LABEL}={IMAGE}:1"
    for image in docker_client.images.list(filters={"label": label}):
        with contextlib.suppress(docker.errors.APIError):
            docker_client.images.remove(str(image.id), force=True)


@pytest.fixture(scope="module")
def page(chromium: Browser, service: ServiceProcess) -> Iterator[Page]:
    width, height = WIDTHS["wide"]
    context = chromium.new_context(
        base_url=service.base_url, viewport={"width": width, "height": height}
    )
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    yield opened
    context.close()


def api_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": ORG}


def hold_run_command(service: ServiceProcess, command: str) -> str:
    """A runCommand of the conversation held for approval (its agent's policy)."""
    response = service.client.post(
        "/v1/tools/execute",
        headers=api_headers(),
        json={
            "conversationId": CONVERSATION,
            "agent": AGENT,
            "user": {"id": "user-1", "role": "User"},
            "function": "runCommand",
            "arguments": {"command": command},
        },
    )
    assert response.status_code == 200 and response.json()["status"] == "pending_approval"
    approval_id: str = response.json()["error"]["approvalId"]
    return approval_id


def detail_path() -> str:
    return f"/console/sandboxes/{ORG}/{CONVERSATION}"


def test_signing_in_takes_an_admin_token(page: Page) -> None:
    page.goto("/console")
    expect(page).to_have_url(re.compile(r"/console/sign-in$"))
    page.get_by_label("Token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Sign in").click()

    expect(page).to_have_url(re.compile(r"/console$"))
    expect(page.get_by_test_id("token-name")).to_have_text(ADMIN)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_a_sandbox_appears_after_a_command_and_shows_its_image_and_executions(
    page: Page, service: ServiceProcess
) -> None:
    run_command(service.client, CONVERSATION, "echo hello > note.txt", org=ORG)
    page.goto("/console/sandboxes?image=debian-base&state=active")
    page.get_by_role("link", name=CONVERSATION).click()

    expect(page).to_have_url(re.compile(f"{detail_path()}$"))
    expect(page.get_by_test_id("image-id")).to_have_text(re.compile(r"^debian-base:\S+$"))
    expect(page.get_by_test_id("image-ref")).to_have_text(re.compile(r"^sha256:[0-9a-f]{64}$"))
    expect(page.get_by_test_id("status")).to_have_text("active")
    expect(page.get_by_test_id("disk")).to_contain_text("used of")  # the workspace's disk
    executions = page.get_by_test_id("executions")
    expect(executions).to_contain_text("runCommand")
    expect(executions).to_contain_text("succeeded")


def test_a_held_call_is_approved_in_the_console_and_then_runs(
    page: Page, service: ServiceProcess
) -> None:
    approval_id = hold_run_command(service, "echo approved-in-console")
    page.goto("/console/approvals")
    held = page.locator(f'[data-approval-id="{approval_id}"]')
    expect(held.locator("pre")).to_contain_text('"command": "echo approved-in-console"')
    held.get_by_role("button", name="Approve").click()

    expect(page).to_have_url(re.compile(r"/console/approvals\?done=approved"))
    expect(page.locator(f'[data-approval-id="{approval_id}"]')).to_have_count(0)
    page.goto(f"/console/executions/{ORG}/{approval_id}")
    expect(page.get_by_test_id("execution-status")).to_have_text("succeeded")
    expect(page.get_by_test_id("execution-approval")).to_contain_text(f"approved by {ADMIN}")
    expect(page.get_by_test_id("execution-result")).to_contain_text("approved-in-console")
    logged = service.client.get(
        "/v1/tools/executions", headers=api_headers(), params={"conversationId": CONVERSATION}
    ).json()["executions"]
    assert {e["id"]: e["status"] for e in logged}[approval_id] == "succeeded"


def test_a_sandbox_is_suspended_and_resumed_each_confirmed(page: Page) -> None:
    for action, status, state in (("Suspend", "paused", "paused"), ("Resume", "active", "running")):
        page.goto(detail_path())
        page.get_by_role("link", name=action, exact=True).click()
        expect(page.get_by_role("heading", name=re.compile(f"^{action} "))).to_be_visible()
        page.get_by_role("button", name=action, exact=True).click()

        expect(page).to_have_url(re.compile(f"{detail_path()}\\?done="))
        expect(page.get_by_test_id("status")).to_have_text(status)
        expect(page.get_by_test_id("sandbox-state")).to_have_text(state)


def test_an_image_is_added_and_built_with_its_log_streamed_into_the_page(page: Page) -> None:
    page.goto("/console/images")
    page.get_by_label("Id").fill(IMAGE)
    page.get_by_label("Tag").fill("1")
    page.get_by_label("Title").fill("Console test image")
    page.get_by_label(re.compile("^Dockerfile")).fill(SLOW_BUILD)
    page.get_by_role("button", name="Add and build").click()

    expect(page).to_have_url(re.compile(r"/console/image-builds/[0-9a-f]{32}$"))
    watch_the_build(page)
    page.get_by_role("link", name=f"{IMAGE}:1").click()
    expect(page.get_by_test_id("image-state")).to_have_text("disabled")
    page.get_by_role("button", name="Enable", exact=True).click()
    expect(page.get_by_test_id("image-state")).to_have_text("enabled")


def watch_the_build(page: Page) -> str:
    """The build page opens while the build runs; its script streams the log in and
    shows the end, without a reload. Returns the digest it shows."""
    log = page.get_by_test_id("build-log")
    expect(log).to_have_attribute("data-running", "yes")  # drawn before the end
    expect(page.get_by_test_id("build-state")).to_have_text("succeeded", timeout=BUILD_MS)
    expect(log).to_contain_text("sleep 2")
    expect(log).to_contain_text(f"built siesta-catalog/{IMAGE}:1")
    digest = page.get_by_test_id("build-digest").inner_text()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), digest
    return digest


def test_an_image_is_rebuilt_watched_and_retired_and_refuses_a_new_conversation(
    page: Page, service: ServiceProcess
) -> None:
    on_it = new_conversation()
    ran = run_command(service.client, on_it, "cat /etc/console-build", org=ORG, image=IMAGE)
    page.goto(f"/console/images/{IMAGE}:1")
    first = page.get_by_test_id("image-digest").inner_text()
    expect(page.get_by_test_id("image-sessions")).to_contain_text(on_it)

    page.get_by_label("every step again").check()
    page.get_by_role("button", name="Rebuild").click()
    expect(page).to_have_url(re.compile(r"/console/image-builds/[0-9a-f]{32}$"))
    assert watch_the_build(page) != first

    page.goto(f"/console/images/{IMAGE}:1")
    page.get_by_role("link", name="Retire…").click()
    expect(page.get_by_role("heading", name=f"Retire {IMAGE}:1?")).to_be_visible()
    expect(page.get_by_role("main")).to_contain_text(f"{ORG}/{on_it}")  # who still uses it
    page.get_by_role("button", name="Retire", exact=True).click()
    expect(page.get_by_test_id("image-state")).to_have_text("retired")
    expect(page.get_by_test_id("image-sessions")).to_contain_text(on_it)

    refused = service.client.post(
        f"/v1/conversations/{new_conversation()}/sandbox/runCommand",
        headers={**api_headers(), "X-Siesta-User": "user-1", "X-Siesta-Base-Image": IMAGE},
        json={"command": "true"},
    )
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "image_retired"
    # The conversation already on it keeps its sandbox, and its first build.
    again = run_command(service.client, on_it, "cat /etc/console-build", org=ORG, image=IMAGE)
    assert again["stdout"] == ran["stdout"]

    page.goto(f"/console/audit?target={IMAGE}:1")
    trail = page.get_by_test_id("audit")
    for action in ("image.add", "image.build", "image.enable", "image.retire"):
        expect(trail).to_contain_text(action)
    expect(trail).to_contain_text(ADMIN)
    service.client.delete(
        f"/v1/conversations/{on_it}", headers={**api_headers(), "X-Siesta-User": "user-1"}
    )


def test_the_keyboard_reaches_the_content_first_through_a_visible_skip_link(page: Page) -> None:
    page.goto("/console/sandboxes")
    page.keyboard.press("Tab")
    focused = page.evaluate(
        "() => [document.activeElement.textContent,"
        " getComputedStyle(document.activeElement).outlineStyle]"
    )
    assert focused == ["Skip to content", "solid"]
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "content"


def test_every_page_fits_both_widths_and_is_kept_as_a_screenshot(
    page: Page, service: ServiceProcess
) -> None:
    approval_id = hold_run_command(service, "echo waiting-for-a-screenshot")
    pages = {
        "overview": "/console",
        "sandboxes": "/console/sandboxes",
        "sandbox": detail_path(),
        "confirm-delete": f"{detail_path()}/delete",
        "approvals": "/console/approvals",
        "executions": "/console/executions",
        "execution": f"/console/executions/{ORG}/{approval_id}",
        "images": "/console/images",
        "image": f"/console/images/{IMAGE}:1",
        "image-build": image_build_path(page),
        "audit": "/console/audit",
        "settings": "/console/settings",  # last: the check below reads it
    }
    screenshots(page, pages)
    expect(page.get_by_test_id("settings")).to_contain_text("••••••")


def image_build_path(page: Page) -> str:
    """The page of the image's last build (made by the tests before)."""
    page.goto(f"/console/images/{IMAGE}:1")
    href = page.get_by_test_id("image-builds").get_by_role("link").first.get_attribute("href")
    assert href is not None
    return href


def screenshots(page: Page, pages: dict[str, str]) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        for width_name, (width, height) in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": height})
            for name, path in pages.items():
                response = page.goto(path)
                assert response is not None and response.status == 200, (name, path)
                page.screenshot(path=ARTIFACTS / f"{name}-{width_name}.png", full_page=True)
                wide = page.evaluate("() => document.documentElement.scrollWidth")
                assert wide <= width + 1, f"{name} is {wide} px wide at {width} px"
    finally:
        width, height = WIDTHS["wide"]
        page.set_viewport_size({"width": width, "height": height})


def test_a_deleted_sandbox_is_gone(page: Page, service: ServiceProcess) -> None:
    page.goto(detail_path())
    page.get_by_role("link", name="Delete", exact=True).click()
    page.get_by_role("button", name="Delete", exact=True).click()

    expect(page).to_have_url(re.compile(r"/console/sandboxes\?done=delete"))
    expect(page.get_by_role("status")).to_contain_text(f"Deleted {ORG}/{CONVERSATION}")
    expect(page.get_by_role("link", name=CONVERSATION)).to_have_count(0)
    described = service.client.get(
        f"/v1/conversations/{CONVERSATION}/sandbox",
        headers={**api_headers(), "X-Siesta-User": "user-1"},
    )
    assert described.status_code == 404


def test_signing_out_ends_the_session_and_its_cookie(page: Page, service: ServiceProcess) -> None:
    page.goto("/console")
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
    cookie = {c["name"]: c["value"] for c in page.context.cookies()}["siesta_console"]
    page.get_by_role("button", name="Sign out").click()

    expect(page).to_have_url(re.compile(r"/console/sign-in$"))
    assert "siesta_console" not in {c["name"] for c in page.context.cookies()}
    screenshots(page, {"sign-in": "/console/sign-in"})
    with httpx.Client(base_url=service.base_url, cookies={"siesta_console": cookie}) as old:
        assert old.get("/console").status_code == 303
        refused = old.post("/console/sign-out", data={"csrf": csrf or ""})
        assert refused.status_code == 401
