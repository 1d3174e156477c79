"""Knowledge bases in the console, in a real browser (Playwright driving Debian's
chromium) against a real service (fake provider: no sandbox is needed): an org's bases
listed, one made, a document typed in and a file uploaded, each followed from queued to
ready as the page reloads itself, a search through the API finding the uploaded one,
a version removed, the base deleted, every action in the audit trail; and another org's
bases never shown under this one.

The tests run in order, one service and one browser for the module.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.helpers import ADMIN_TOKEN, CONSOLE_TOKENS
from tests.helpers import TOKEN, ServiceProcess, StartService

pytestmark = [pytest.mark.slow]

ORG, OTHER = "org-kb-console", "org-kb-other"
TIMEOUT_MS = 20_000
PLAN = "# Launch plan\n\n## Dates\n\nThe public launch is on the ninth of May.\n"


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    return start_service(
        "fake",
        SIESTA_TOKENS=CONSOLE_TOKENS,
        SIESTA_KNOWLEDGE__INDEXER_POLL_SECONDS="0.2",
    )


@pytest.fixture(scope="module")
def page(chromium: Browser, service: ServiceProcess) -> Iterator[Page]:
    context = chromium.new_context(base_url=service.base_url)
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    yield opened
    context.close()


def api(org: str = ORG) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": org}


def test_an_orgs_bases_are_listed_and_only_its_own(page: Page, service: ServiceProcess) -> None:
    made = service.client.post("/v1/knowledge-bases", headers=api(OTHER), json={"name": "Hidden"})
    assert made.status_code == 201, made.text
    page.goto("/console")
    page.get_by_label("Token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Knowledge").click()
    page.get_by_test_id("knowledge-org").fill(ORG)
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_test_id("knowledge-bases")).to_contain_text("no knowledge base")
    expect(page.get_by_test_id("knowledge-bases")).not_to_contain_text("Hidden")


def test_a_base_is_made_and_documents_go_from_queued_to_ready(
    page: Page, service: ServiceProcess, tmp_path: Path
) -> None:
    page.get_by_label("Name").fill("Plans")
    page.get_by_label(re.compile("^Description")).fill("Launch plans")
    page.get_by_role("button", name="Make").click()
    expect(page.get_by_role("heading", name=re.compile("^Plans"))).to_be_visible()

    page.get_by_label(re.compile("^Name")).fill("launch.md")
    page.get_by_label(re.compile("^Or its text")).fill(PLAN)
    page.get_by_role("button", name="Add").click()
    expect(page.get_by_test_id("knowledge-done")).to_have_text("Document added.")
    # The page reloads itself while a document is queued or indexing.
    expect(page.get_by_test_id("version-status").first).to_have_text("ready")

    upload = tmp_path / "rates.csv"
    upload.write_text("city,rate\nLisbon,120\nOslo,210\n")
    page.get_by_label(re.compile("^File")).set_input_files(str(upload))
    page.get_by_role("button", name="Add").click()
    expect(page.get_by_test_id("knowledge-done")).to_have_text("Document added.")
    rows = page.get_by_test_id("knowledge-versions").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("rates.csv")
    expect(rows.first.get_by_test_id("version-status")).to_have_text("ready")

    base = page.url.rsplit("/", 1)[-1].split("?")[0]
    found = service.client.post(
        f"/v1/knowledge-bases/{base}/search", headers=api(), json={"query": "Oslo rate"}
    )
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["source_name"] == "rates.csv"


def test_a_version_is_removed_and_the_base_deleted(page: Page, service: ServiceProcess) -> None:
    rows = page.get_by_test_id("knowledge-versions").locator("tbody tr")
    rows.first.get_by_role("button", name="Remove").click()
    expect(page.get_by_test_id("knowledge-done")).to_have_text("Document removed.")
    expect(rows).to_have_count(1)
    page.get_by_role("button", name=re.compile("^Delete this base")).click()
    expect(page.get_by_test_id("knowledge-bases")).to_contain_text("no knowledge base")

    audit = httpx.get(
        f"{service.base_url}/v1/admin/audit",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        params={"via": "console"},
    )
    assert audit.status_code == 200, audit.text
    actions = [entry["action"] for entry in audit.json()["entries"]]
    for action in (
        "knowledge_base.create",
        "knowledge_base.add_document",
        "knowledge_base.remove_document",
        "knowledge_base.delete",
    ):
        assert action in actions, actions
