"""Knowledge bases over HTTP (the app in this process, SQLite, its own indexer):
operators make an org's bases and add documents, the indexer makes them searchable in
the background, agents search them through ``POST /v1/tools/execute`` and follow a
result up with the content tools. The reference's three scenarios decide which
functions the catalog offers (seeds/004_*, "Knowledge Base Tools")."""

from __future__ import annotations

import base64
import io
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_tools import execute
from tests.helpers import TOKEN, wait_until
from tests.inprocess import InProcessService, in_process_service

AGENT = {"id": "agent-1", "systemToolIds": ["knowledge_base", "content"]}
USER = {"id": "user-1", "role": "User"}


def org(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": name}


A, B = org("org-a"), org("org-b")
LIMITS = {
    "SIESTA_KNOWLEDGE__MAX_BASES_PER_ORG": "9",
    "SIESTA_KNOWLEDGE__MAX_DOCUMENT_BYTES": "200000",
    "SIESTA_KNOWLEDGE__MAX_CHUNKS_PER_BASE": "120",
    "SIESTA_KNOWLEDGE__CHUNK_CHARS": "400",
    "SIESTA_KNOWLEDGE__CHUNK_OVERLAP_CHARS": "80",
    "SIESTA_KNOWLEDGE__INDEXER_POLL_SECONDS": "0.1",
}

HANDBOOK = """# Employee handbook

Welcome. This handbook says how the company works day to day.

## Travel

### Expenses

Keep every receipt. Claims for train tickets, hotel nights and meals are paid back
within two weeks when filed in the expenses tool with the receipt attached.

### Booking

Book flights through the travel desk at least ten days ahead.

## Time off

Everyone gets twenty-eight days of paid holiday a year, plus public holidays.
Ask your manager in the calendar tool a week before.
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {"SIESTA_PROVIDER__TYPE": "fake", **LIMITS}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def make_base(service: InProcessService, name: str, headers: dict[str, str] = A) -> str:
    body = {"name": name, "description": f"{name}: what we know"}
    made = service.client.post("/v1/knowledge-bases", headers=headers, json=body)
    assert made.status_code == 201, made.text
    base_id: str = made.json()["knowledgeBaseId"]
    return base_id


def add(
    service: InProcessService, base: str, headers: dict[str, str] = A, **body: Any
) -> tuple[int, dict[str, Any]]:
    added = service.client.post(f"/v1/knowledge-bases/{base}/documents", headers=headers, json=body)
    answer: dict[str, Any] = added.json()
    return added.status_code, answer


def ready(service: InProcessService, base: str, version: str) -> dict[str, Any]:
    """The version once the indexer is done with it (ready or failed)."""
    seen: dict[str, Any] = {}

    def done() -> bool:
        got = service.client.get(f"/v1/knowledge-bases/{base}/documents/{version}", headers=A)
        assert got.status_code == 200, got.text
        seen.update(got.json())
        return seen["status"] in ("ready", "failed")

    assert wait_until(done, timeout=30), seen
    return seen


def call(
    service: InProcessService,
    function: str,
    agent: dict[str, Any] = AGENT,
    headers: dict[str, str] = A,
    **arguments: Any,
) -> dict[str, Any]:
    return execute(service, "conv-1", function, arguments, agent, headers)


def result(service: InProcessService, function: str, **arguments: Any) -> Any:
    outcome = call(service, function, **arguments)
    assert outcome["ok"], outcome
    return outcome["result"]


def catalog(service: InProcessService, agent: dict[str, Any]) -> dict[str, Any]:
    response = service.client.post(
        "/v1/tools/catalog", headers=A, json={"agent": agent, "user": USER, "org": "org-a"}
    )
    assert response.status_code == 200, response.text
    return {f["name"]: f for f in response.json()["functions"]}


def test_a_document_is_indexed_in_the_background_then_found_by_meaning(
    service: InProcessService,
) -> None:
    base = make_base(service, "Handbook")
    status, version = add(service, base, name="handbook.md", text=HANDBOOK)
    assert status == 202 and version["status"] == "queued", version
    done = ready(service, base, version["contentVersionId"])
    assert done["status"] == "ready", done
    assert done["title"] == "Employee handbook" and done["chunks"] >= 4, done

    found = result(
        service,
        "search_knowledge_base",
        knowledge_base_id=base,
        query="how long until my hotel costs are reimbursed?",
        top_n=3,
    )
    assert found["method"] == "hybrid" and found["pending"] == 0, found
    best = found["results"][0]
    assert best["source_connection_content_version_id"] == version["contentVersionId"]
    assert best["source_name"] == "handbook.md"
    assert best["content_title"] == "Employee handbook"
    assert best["heading"] == "Employee handbook > Travel > Expenses", best
    assert "within two weeks" in best["text"]
    assert len(found["results"]) <= 3

    # The follow-up the reference describes: the content tools read the version.
    loaded = result(service, "load_content", file=best["source_connection_content_version_id"])
    assert loaded["content"].startswith("# Employee handbook") and loaded["file"]["name"] == (
        "handbook.md"
    )
    peeked = result(
        service,
        "peek_content",
        file=best["source_connection_content_version_id"],
        start=best["start"],
        stop=best["start"] + 40,
    )
    assert best["text"].startswith(peeked["content"][:30]), (peeked, best)
    grepped = result(
        service, "grep_content", file=best["source_connection_content_version_id"], query="receipt"
    )
    assert [m["line"] for m in grepped["matches"]] == [9, 10]
    stats = result(service, "get_content_stats", file=best["source_connection_content_version_id"])
    assert stats["kind"] == "knowledge" and stats["chars"] == done["chars"]


def test_a_changed_document_is_a_new_version_and_the_old_stays_until_removed(
    service: InProcessService,
) -> None:
    base = make_base(service, "Policies")
    first = add(service, base, name="policy.txt", text="Laptops are replaced every three years.")[1]
    ready(service, base, first["contentVersionId"])
    status, again = add(
        service, base, name="policy.txt", text="Laptops are replaced every three years."
    )
    assert status == 200 and again["contentVersionId"] == first["contentVersionId"]  # unchanged
    status, second = add(
        service, base, name="policy.txt", text="Laptops are replaced every four years."
    )
    assert status == 202 and second["documentId"] == first["documentId"]
    assert second["contentVersionId"] != first["contentVersionId"]
    ready(service, base, second["contentVersionId"])

    def versions_found() -> set[str]:
        found = result(
            service, "search_knowledge_base", knowledge_base_id=base, query="laptops replaced"
        )
        return {hit["source_connection_content_version_id"] for hit in found["results"]}

    assert versions_found() == {first["contentVersionId"], second["contentVersionId"]}
    removed = service.client.delete(
        f"/v1/knowledge-bases/{base}/documents/{first['contentVersionId']}", headers=A
    )
    assert removed.status_code == 204
    assert versions_found() == {second["contentVersionId"]}
    gone = call(service, "load_content", file=first["contentVersionId"])
    assert not gone["ok"] and gone["error"]["code"] == "content_version_not_found", gone


def test_documents_come_from_uploads_files_and_formats_agents_hand_over(
    service: InProcessService,
) -> None:
    base = make_base(service, "Mixed")
    uploaded = service.client.post(
        "/v1/conversations/conv-files/files",
        headers={**A, "X-Siesta-User": "user-1"},
        files={"file": ("rates.csv", b"city,rate\nLisbon,120\nOslo,210\n", "text/csv")},
    )
    assert uploaded.status_code == 201, uploaded.text
    from_file = add(service, base, conversationId="conv-files", fileId=uploaded.json()["id"])[1]
    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    docx = add(
        service,
        base,
        name="onboarding.docx",
        contentBase64=base64.b64encode(_docx()).decode(),
        contentType=docx_type,
    )[1]
    html = add(
        service,
        base,
        name="faq.html",
        text="<html><title>FAQ</title><nav>menu</nav><h2>Parking</h2><p>Level -2 is ours.</p>",
    )[1]
    for version in (from_file, docx, html):
        assert ready(service, base, version["contentVersionId"])["status"] == "ready"

    def best(query: str) -> dict[str, Any]:
        hits = result(service, "search_knowledge_base", knowledge_base_id=base, query=query)
        first: dict[str, Any] = hits["results"][0]
        return first

    rows = best("Oslo rate")["text"].split("\n\n")
    assert "city: Oslo; rate: 210" in rows  # a row, each cell named by its column
    hit = best("first day badge")
    assert hit["source_name"] == "onboarding.docx" and hit["heading"] == "First day", hit
    parking = best("where do we park")
    assert (parking["content_title"], parking["heading"]) == ("FAQ", "Parking"), parking
    assert "menu" not in parking["text"]


def test_what_cannot_be_indexed_is_refused_or_fails_saying_why(service: InProcessService) -> None:
    base = make_base(service, "Refusals")
    # An upload names its format, one of those read: the schema refuses any other.
    status, _ = add(service, base, name="tool.exe", contentBase64="TVqQAAMAAAAEAAAA")
    assert status == 422
    status, _ = add(
        service, base, name="tool.exe", contentBase64="TVqQ", contentType="application/x-exe"
    )
    assert status == 422
    # A conversation's file is taken as it is, and fails to index if no reader knows it.
    uploaded = service.client.post(
        "/v1/conversations/conv-refusals/files",
        headers={**A, "X-Siesta-User": "user-1"},
        files={"file": ("tool.exe", b"MZ\x90\x00", "application/x-msdownload")},
    )
    assert uploaded.status_code == 201, uploaded.text
    status, exe = add(service, base, conversationId="conv-refusals", fileId=uploaded.json()["id"])
    assert status == 202
    failed = ready(service, base, exe["contentVersionId"])
    assert failed["status"] == "failed" and "not a format" in failed["error"], failed
    status, large = add(service, base, name="big.txt", text="x" * 200_001)
    assert status == 413 and large["error"]["code"] == "document_too_large"
    assert "SIESTA_KNOWLEDGE__MAX_DOCUMENT_BYTES" in large["error"]["message"]
    status, broken = add(
        service,
        base,
        name="broken.pdf",
        contentBase64=base64.b64encode(b"%PDF-no").decode(),
        contentType="application/pdf",
    )
    assert status == 202
    failed = ready(service, base, broken["contentVersionId"])
    assert failed["status"] == "failed" and "broken.pdf" in failed["error"], failed
    # Passages past the base's limit (120, with 400-character passages): the version fails.
    status, many = add(service, base, name="long.txt", text="\n\n".join(["word " * 70] * 200))
    failed = ready(service, base, many["contentVersionId"])
    assert failed["status"] == "failed", failed
    assert "SIESTA_KNOWLEDGE__MAX_CHUNKS_PER_BASE" in failed["error"]
    for bad in (
        {},
        {"text": "x"},  # no name
        {"url": "ftp://x"},
        {"fileId": "f", "name": "x"},  # no conversation
        {"name": "x", "text": "a", "url": "http://x"},  # two sources
        {"name": "x.pdf", "contentBase64": "not base64!", "contentType": "application/pdf"},
    ):
        answer = service.client.post(f"/v1/knowledge-bases/{base}/documents", headers=A, json=bad)
        assert answer.status_code == 422, bad


def test_documents_by_url_need_egress(service: InProcessService) -> None:
    base = make_base(service, "Pages")
    status, refused = add(service, base, url="https://example.com/handbook.html")
    assert status == 409 and refused["error"]["code"] == "url_documents_off", refused
    assert "SIESTA_EGRESS__ALLOW" in refused["error"]["message"]


def test_an_orgs_bases_limit_names_its_setting(service: InProcessService) -> None:
    headers = org("org-full")
    for n in range(9):
        make_base(service, f"base {n}", headers)
    refused = service.client.post("/v1/knowledge-bases", headers=headers, json={"name": "one more"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "knowledge_limit_reached"
    assert "SIESTA_KNOWLEDGE__MAX_BASES_PER_ORG" in refused.json()["error"]["message"]


def test_another_orgs_agent_finds_nothing_of_a_base(service: InProcessService) -> None:
    base = make_base(service, "Secret plans")
    version = add(service, base, name="plans.md", text="# Plans\n\nThe launch is in May.")[1]
    ready(service, base, version["contentVersionId"])
    listed = result(service, "list_knowledge_bases")["knowledge_bases"]
    assert base in [b["knowledge_base_id"] for b in listed]
    outcome = call(
        service, "search_knowledge_base", headers=B, knowledge_base_id=base, query="launch"
    )
    assert outcome["error"]["code"] == "knowledge_base_not_found", outcome
    read = call(service, "load_content", headers=B, file=version["contentVersionId"])
    assert read["error"]["code"] == "content_version_not_found", read
    b_listed = call(service, "list_knowledge_bases", headers=B)["result"]["knowledge_bases"]
    assert base not in [b["knowledge_base_id"] for b in b_listed]


def test_the_three_scenarios_of_the_reference(service: InProcessService) -> None:
    base = make_base(service, "Scenarios")
    version = add(service, base, name="s.md", text="# S\n\nThe office opens at eight.")[1]
    ready(service, base, version["contentVersionId"])

    # 2b: no id known: both functions, and search needs the id.
    offered = catalog(service, AGENT)
    assert {"list_knowledge_bases", "search_knowledge_base"} <= set(offered)
    search = offered["search_knowledge_base"]["parameters"]
    assert "knowledge_base_id" in search["required"]
    top_n = search["properties"]["top_n"]
    bounds = next(option for option in top_n["anyOf"] if option["type"] == "integer")
    assert (bounds["minimum"], bounds["maximum"], top_n["default"]) == (1, 200, 10)

    # 1: the prompt names it: search alone, the id still required.
    in_prompt = catalog(service, {**AGENT, "knowledgeBaseInPrompt": True})
    assert "list_knowledge_bases" not in in_prompt
    assert "knowledge_base_id" in in_prompt["search_knowledge_base"]["parameters"]["required"]

    # 2a: the run's metadata names it: the parameter's default, used when left out.
    agent = {**AGENT, "knowledgeBaseDefault": base}
    with_default = catalog(service, agent)
    assert "list_knowledge_bases" not in with_default
    parameters = with_default["search_knowledge_base"]["parameters"]
    assert "knowledge_base_id" not in parameters.get("required", [])
    assert parameters["properties"]["knowledge_base_id"]["default"] == base
    found = call(service, "search_knowledge_base", agent=agent, query="when does the office open")
    assert found["ok"] and found["result"]["knowledge_base_id"] == base, found
    assert "eight" in found["result"]["results"][0]["text"]
    without = call(service, "search_knowledge_base", query="office")
    assert without["error"]["code"] == "invalid_arguments", without


def test_deleting_a_base_takes_its_documents(service: InProcessService) -> None:
    base = make_base(service, "Short-lived")
    version = add(service, base, name="x.md", text="# X\n\nTemporary.")[1]
    ready(service, base, version["contentVersionId"])
    assert service.client.delete(f"/v1/knowledge-bases/{base}", headers=A).status_code == 204
    assert service.client.get(f"/v1/knowledge-bases/{base}", headers=A).status_code == 404
    read = call(service, "load_content", file=version["contentVersionId"])
    assert read["error"]["code"] == "content_version_not_found", read


def _docx() -> bytes:
    """A Word file as Word writes one: a heading style, paragraphs, a table."""
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = (
        f"<w:document {w}><w:body>"
        '<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>First day</w:t></w:r></w:p>'
        "<w:p><w:r><w:t>Pick up your badge at reception before nine.</w:t></w:r></w:p>"
        "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Desk</w:t></w:r></w:p></w:tc>"
        "<w:tc><w:p><w:r><w:t>4.12</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
        "</w:body></w:document>"
    )
    styles = (
        f'<w:styles {w}><w:style w:type="paragraph" w:styleId="Heading1">'
        '<w:name w:val="heading 1"/></w:style></w:styles>'
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", document)
        archive.writestr("word/styles.xml", styles)
    return buffer.getvalue()


def catalog_answer(service: InProcessService, agent: dict[str, Any]) -> dict[str, Any]:
    response = service.client.post(
        "/v1/tools/catalog", headers=A, json={"agent": agent, "user": USER, "org": "org-a"}
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_an_agents_files_and_the_two_strategies_of_seed_003(service: InProcessService) -> None:
    """Direct: files pre-loaded smallest first within the budget (18,000 characters),
    file_search only for what overflowed and only with the switch on; RAG: file_search
    whenever there is a file, switch or not."""
    base = make_base(service, "Agent files")
    small = add(
        service, base, name="small.md", text="# Small\n\nThe wifi password is on the fridge."
    )[1]
    medium = add(service, base, name="medium.md", text="# Medium\n\n" + "Parking rules. " * 600)[1]
    large = add(service, base, name="large.md", text="# Large\n\n" + "Safety manual words. " * 900)[
        1
    ]
    for version in (small, medium, large):
        assert ready(service, base, version["contentVersionId"])["status"] == "ready"

    files: dict[str, Any] = {"knowledgeBaseId": base, "strategy": "direct"}
    direct = {**AGENT, "files": files}
    answer = catalog_answer(service, direct)
    preloaded = [f["name"] for f in answer["preloadedFiles"]]
    assert preloaded == ["small.md", "medium.md"]  # smallest first; large overflows
    assert answer["preloadedFiles"][0]["text"].startswith("# Small")
    names = {f["name"] for f in answer["functions"]}
    assert "file_search" not in names  # the switch is off
    assert any("fileSearch" in note for note in answer["notes"]), answer["notes"]

    switched = {**AGENT, "files": {**files, "fileSearch": True}}
    names = {f["name"] for f in catalog_answer(service, switched)["functions"]}
    assert "file_search" in names
    found = call(service, "file_search", agent=switched, query="safety manual", limit=2)
    assert found["ok"], found
    assert found["result"]["results"][0]["source_name"] == "large.md"
    assert len(found["result"]["results"]) <= 2

    rag = {**AGENT, "files": {"knowledgeBaseId": base, "strategy": "rag"}}
    answer = catalog_answer(service, rag)
    assert answer["preloadedFiles"] == []
    assert "file_search" in {f["name"] for f in answer["functions"]}  # switch or not
    limit = catalog_answer(service, rag)["functions"]
    (spec,) = [f for f in limit if f["name"] == "file_search"]
    assert spec["parameters"]["required"] == ["query"]

    # Everything fits: file_search is pruned even with the switch on.
    removed = service.client.delete(
        f"/v1/knowledge-bases/{base}/documents/{large['contentVersionId']}", headers=A
    )
    assert removed.status_code == 204
    answer = catalog_answer(service, switched)
    assert "file_search" not in {f["name"] for f in answer["functions"]}
    assert [f["name"] for f in answer["preloadedFiles"]] == ["small.md", "medium.md"]
    refused = call(service, "file_search", agent=switched, query="parking")
    assert not refused["ok"], refused  # not in this agent's catalog now
