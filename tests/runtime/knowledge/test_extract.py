"""Text out of each format agents hand over, headings kept as ``#`` lines; anything
else refused, and a broken file failing with its reason, never crashing the reader."""

from __future__ import annotations

import io

import openpyxl
import pytest

from runtime.knowledge.extract import UnsupportedDocument, extract, format_of


def test_markdown_and_plain_text_are_read_as_they_are() -> None:
    found = extract(b"intro\n# Title\n\nBody\r\n", "notes.md", "application/octet-stream")
    assert (found.text, found.title) == ("intro\n# Title\n\nBody\n", "Title")
    assert extract(b"just words", "a.txt", "text/plain").text == "just words"


def test_html_keeps_headings_paragraphs_and_table_rows_not_scripts() -> None:
    page = (
        b"<html><head><title>Rates</title><script>evil()</script></head><body>"
        b"<nav>Home | About</nav><h1>Prices</h1><p>All in <b>euros</b>.</p>"
        b"<table><tr><th>Room</th><th>Rate</th></tr><tr><td>Single</td><td>90</td></tr></table>"
        b"<ul><li>Breakfast included</li></ul></body></html>"
    )
    found = extract(page, "rates.html", "text/html; charset=utf-8")
    assert found.title == "Rates"
    assert found.text.split("\n\n") == [
        "# Prices",
        "All in euros .",
        "Room | Rate",
        "Single | 90",
        "Breakfast included",
    ]


def test_a_pdfs_pages_are_read() -> None:
    found = extract(_pdf("Refunds take ten days."), "policy.pdf", "application/pdf")
    assert "Refunds take ten days." in found.text


def test_sheets_and_csv_become_rows_named_by_their_headers() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Stock"
    for row in (["item", "count"], ["bolts", 40], ["nuts", None]):
        sheet.append(row)
    data = io.BytesIO()
    book.save(data)
    found = extract(data.getvalue(), "stock.xlsx", "")
    assert found.text == "# Stock\n\nitem: bolts; count: 40\n\nitem: nuts"
    csv = extract(b"name,city\nAda,Paris\n,Rome\n", "people.csv", "text/csv")
    assert csv.text == "name: Ada; city: Paris\n\ncity: Rome"


def test_other_kinds_are_refused_and_broken_files_fail_with_the_reason() -> None:
    with pytest.raises(UnsupportedDocument, match="not a format knowledge bases read"):
        format_of("tool.exe", "application/x-msdownload")
    with pytest.raises(UnsupportedDocument, match=r"'bad\.docx' could not be read as docx"):
        extract(b"not a zip", "bad.docx", "")
    with pytest.raises(UnsupportedDocument, match="binary"):
        extract(b"\x00\x01\x02", "blob.txt", "text/plain")


def _pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica, written by hand (the objects and
    the cross-reference table a reader needs, nothing more)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
