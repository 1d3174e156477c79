"""A preview never reaches the console, in a real browser (Playwright driving Debian's
chromium) against a real service on Docker. An operator is signed in to the console;
a server in a sandbox answers a page whose script reads a console page for its CSRF
token and posts a change (disable an image) with it, and whose form posts the same.
Opened through the path form (the console's origin) the page is inert: its script
does not run, its form does not send, and the same script run in it anyway (as
DevTools would) reads nothing. Opened on its own host (the preview domain) it runs, on
an origin the console's cookie and pages are not for. The catalog stays as it was and
the console session lives on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.helpers import ADMIN, ADMIN_TOKEN, CONSOLE_TOKENS
from tests.helpers import TOKEN, ServiceProcess, StartService, new_conversation

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ORG = "org-preview"
PORT = 8000
DOMAIN = "previews.localhost"
TIMEOUT_MS = 15_000
ATTACK = """async (target) => {
  const report = {};
  try {
    const url = new URL("/console/images", target);
    const page = await (await fetch(url, {credentials: "include"})).text();
    report.read = page.length;
    // Split, so that the page holding this script never finds itself.
    report.console = page.includes("data-testid=" + '"token-name"');
    const csrf = (page.match(new RegExp('name="csrf" ' + 'value="([^"]+)"')) || [])[1] || "";
    report.csrf = csrf !== "";
    const posted = await fetch(target, {
      method: "POST", credentials: "include", body: new URLSearchParams({csrf}),
    });
    report.posted = posted.status;
  } catch (error) {
    report.error = String(error);
  }
  return report;
}"""
"""What the page's script does: read a console page (at ``target``'s origin) for its CSRF
token, post the change to ``target`` with it."""
PAGE = """<!doctype html><html><head><title>preview</title></head><body>
<form method=post action="TARGET"><input name=csrf value=x><button>Post it</button></form>
<script>
document.title = "ran";
(ATTACK)("TARGET").then((report) => {
  document.body.dataset.report = JSON.stringify(report);
});
</script></body></html>"""
SERVER = f"""
import http.server, pathlib
page = pathlib.Path("page.html").read_bytes()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
    do_POST = do_GET
http.server.ThreadingHTTPServer(("127.0.0.1", {PORT}), Handler).serve_forever()
"""


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: object) -> ServiceProcess:
    return start_service(
        "docker", SIESTA_TOKENS=CONSOLE_TOKENS, SIESTA_PORTS__PREVIEW_DOMAIN=DOMAIN
    )


def api(service: ServiceProcess, method: str, path: str, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": ORG, "X-Siesta-User": "u"}
    headers["X-Siesta-Base-Image"] = "python"
    response = service.client.request(method, path, json=body, headers=headers)
    assert response.status_code in (200, 201), response.text
    return response.json()


def catalog(service: ServiceProcess) -> dict[str, tuple[str, bool]]:
    images = api(service, "GET", "/v1/admin/images")["images"]
    return {image["ref"]: (image["state"], image["default"]) for image in images}


@pytest.fixture(scope="module")
def target(service: ServiceProcess) -> str:
    """The console address the page posts its change to (disable an enabled image)."""
    enabled = [ref for ref, (state, _) in catalog(service).items() if state == "enabled"]
    return f"{service.base_url}/console/images/{enabled[0]}/disable"


@pytest.fixture(scope="module")
def access(service: ServiceProcess, target: str) -> dict[str, Any]:
    """The sandbox's server of the hostile page, answering; its port access."""
    conversation = new_conversation()
    path = f"/v1/conversations/{conversation}/sandbox"
    page = PAGE.replace("ATTACK", ATTACK).replace("TARGET", target)
    api(service, "POST", f"{path}/writeFile", {"path": "page.html", "content": page})
    api(service, "POST", f"{path}/writeFile", {"path": "server.py", "content": SERVER})
    api(service, "POST", f"{path}/processes", {"command": "python3 server.py"})
    for _ in range(100):
        opened: dict[str, Any] = api(service, "GET", f"{path}/ports/{PORT}")
        if opened["listening"]:
            return opened
    pytest.fail("the page's server never listened")


@pytest.fixture(scope="module")
def page(chromium: Browser, service: ServiceProcess) -> Iterator[Page]:
    """A browser signed in to the console."""
    context = chromium.new_context(base_url=service.base_url)
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    opened.goto("/console/sign-in")
    opened.get_by_label("Token").fill(ADMIN_TOKEN)
    opened.get_by_role("button", name="Sign in").click()
    expect(opened.get_by_test_id("token-name")).to_have_text(ADMIN)
    yield opened
    context.close()


def still_signed_in(page: Page) -> None:
    page.goto("/console/images")
    expect(page.get_by_test_id("token-name")).to_have_text(ADMIN)


def test_on_the_path_form_the_page_reads_nothing_and_changes_nothing(
    page: Page, service: ServiceProcess, access: dict[str, Any], target: str
) -> None:
    before = catalog(service)
    answer = page.goto(access["url"])
    assert answer is not None and answer.status == 200
    assert answer.headers["content-security-policy"] == "sandbox"
    page.wait_for_timeout(1000)  # what the script would do, it would have done
    assert page.title() == "preview"  # its script did not run
    assert page.locator("body").get_attribute("data-report") is None
    page.get_by_role("button", name="Post it").click()  # a sandboxed page's form never sends
    page.wait_for_timeout(500)
    assert re.search(r"/ports/8000/", page.url)
    # The script run in the page anyway: an opaque origin, cross-origin to the console.
    report = page.evaluate(ATTACK, target)
    assert "read" not in report and "posted" not in report, json.dumps(report)
    assert "Failed to fetch" in report["error"]
    assert catalog(service) == before
    still_signed_in(page)


def test_on_its_own_host_the_page_runs_and_still_reaches_no_console(
    page: Page, service: ServiceProcess, access: dict[str, Any]
) -> None:
    before = catalog(service)
    preview = access["previewUrl"]
    assert re.match(rf"^http://{PORT}-[a-z2-7]{{24}}\.{re.escape(DOMAIN)}:\d+/\?token=", preview)
    page.goto(preview)
    expect(page).to_have_title("ran")  # its own origin: it runs as served
    report = json.loads(page.locator("body").get_attribute("data-report") or "{}")
    if not report:
        page.wait_for_function("document.body.dataset.report !== undefined")
        report = json.loads(page.locator("body").get_attribute("data-report") or "{}")
    # The console's address is another site: its cookie is not sent, nothing is read.
    assert "read" not in report and "posted" not in report, json.dumps(report)
    assert "Failed to fetch" in report["error"]
    assert catalog(service) == before
    still_signed_in(page)
