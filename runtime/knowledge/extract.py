"""Text out of the documents agents hand over, with headings kept as Markdown ``#`` lines
so that chunking (``chunking.py``) can keep each passage with its headings.

Formats: plain text and Markdown (as they are), HTML (headings, paragraphs, list items
and table cells; scripts and navigation dropped), PDF (each page's text, ``pypdf``),
DOCX (paragraphs, ``Heading N`` styles as headings, tables as rows: read from the
file's XML, no dependency), XLSX and CSV (one line per row, ``header: value`` pairs, a
heading per sheet). The format is chosen by content type, else by the name's
extension. Anything else, or bytes that are not what they claim, is
``UnsupportedDocument`` with the reason.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from xml.etree import ElementTree

from selectolax.lexbor import LexborHTMLParser

from runtime.core.errors import InvalidRequest

MAX_ROWS = 100_000
"""Rows of a sheet or CSV read (a document's bytes are capped too, by a setting)."""
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_HEADING_STYLE = re.compile(r"^(?:heading|title)\s*(\d?)$", re.IGNORECASE)


class UnsupportedDocument(InvalidRequest):
    code = "unsupported_document"


@dataclass(frozen=True)
class Extracted:
    text: str
    title: str
    """Its own title (an HTML ``<title>``, the first heading), ``""`` when none."""


FORMATS = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/csv": "csv",
}
EXTENSIONS = {
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".xlsx": "xlsx",
    ".csv": "csv",
}


def format_of(name: str, content_type: str) -> str:
    """Which reader a document needs, or ``UnsupportedDocument``."""
    found = FORMATS.get(content_type.split(";")[0].strip().lower())
    if found is None:
        suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
        found = EXTENSIONS.get(suffix)
    if found is None:
        kinds = ", ".join(sorted(set(EXTENSIONS)))
        msg = f"{name!r} ({content_type}): not a format knowledge bases read ({kinds})"
        raise UnsupportedDocument(msg, contentType=content_type)
    return found


def extract(data: bytes, name: str, content_type: str) -> Extracted:
    kind = format_of(name, content_type)
    try:
        return _READERS[kind](data)
    except UnsupportedDocument:
        raise
    except Exception as exc:  # a broken file of any kind: say so, never crash an indexer
        msg = f"{name!r} could not be read as {kind}: {type(exc).__name__}: {exc}"[:500]
        raise UnsupportedDocument(msg, contentType=content_type) from exc


def _text(data: bytes) -> Extracted:
    text = _decoded(data)
    return Extracted(text, "")


def _markdown(data: bytes) -> Extracted:
    text = _decoded(data)
    first = next((line for line in text.splitlines() if line.startswith("#")), "")
    return Extracted(text, first.lstrip("#").strip())


def _decoded(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        msg = "the document is binary, not text"
        raise UnsupportedDocument(msg)
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def _html(data: bytes) -> Extracted:
    tree = LexborHTMLParser(data.decode("utf-8", errors="replace"))
    title_node = tree.css_first("title")
    for node in tree.css("script,style,nav,header,footer,iframe,svg,noscript,template"):
        node.decompose()
    lines = []
    for node in tree.css("h1,h2,h3,h4,h5,h6,p,li,pre,blockquote,tr"):
        if (node.tag or "") == "tr":
            cells = [c.text(strip=True, separator=" ") for c in node.css("th,td")]
            text = " | ".join(cell for cell in cells if cell)
        else:
            text = node.text(strip=True, separator=" ")
        if not text:
            continue
        tag = node.tag or ""
        level = int(tag[1]) if tag[:1] == "h" and tag[1:].isdigit() else 0
        lines.append(f"{'#' * level} {text}" if level else text)
    title = title_node.text(strip=True) if title_node else ""
    heading = next((line.lstrip("#").strip() for line in lines if line.startswith("#")), "")
    return Extracted("\n\n".join(lines), title or heading)


def _pdf(data: bytes) -> Extracted:
    from pypdf import PdfReader  # imported when a PDF comes: most deployments never read one

    reader = PdfReader(io.BytesIO(data))
    pages = [(page.extract_text() or "").strip() for page in reader.pages]
    meta = reader.metadata
    title = str(meta.title) if meta is not None and meta.title else ""
    return Extracted("\n\n".join(page for page in pages if page), title)


def _docx(data: bytes) -> Extracted:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        document = ElementTree.fromstring(archive.read("word/document.xml"))
        styles = _docx_styles(archive)
    lines: list[str] = []
    body = document.find(f"{_W}body")
    for block in body if body is not None else []:
        if block.tag == f"{_W}p":
            text = _runs(block)
            level = _heading_level(block, styles)
            if text:
                lines.append(f"{'#' * level} {text}" if level else text)
        elif block.tag == f"{_W}tbl":
            for row in block.iter(f"{_W}tr"):
                cells = [_runs(cell) for cell in row.iter(f"{_W}tc")]
                lines.append(" | ".join(cell for cell in cells if cell))
    heading = next((line.lstrip("#").strip() for line in lines if line.startswith("#")), "")
    return Extracted("\n\n".join(line for line in lines if line), heading)


def _docx_styles(archive: zipfile.ZipFile) -> dict[str, int]:
    """Style id → heading level, from the styles' names (``heading 2``, ``Title``)."""
    if "word/styles.xml" not in archive.namelist():
        return {}
    levels = {}
    for style in ElementTree.fromstring(archive.read("word/styles.xml")).iter(f"{_W}style"):
        name = style.find(f"{_W}name")
        match = _HEADING_STYLE.match(name.get(f"{_W}val", "") if name is not None else "")
        if match:
            levels[style.get(f"{_W}styleId", "")] = int(match.group(1) or 1)
    return levels


def _heading_level(paragraph: ElementTree.Element, styles: dict[str, int]) -> int:
    style = paragraph.find(f"{_W}pPr/{_W}pStyle")
    style_id = style.get(f"{_W}val", "") if style is not None else ""
    if style_id in styles:
        return min(styles[style_id], 6)
    match = _HEADING_STYLE.match(style_id)
    return min(int(match.group(1) or 1), 6) if match else 0


def _runs(element: ElementTree.Element) -> str:
    return "".join(node.text or "" for node in element.iter(f"{_W}t")).strip()


def _xlsx(data: bytes) -> Extracted:
    from python_calamine import CalamineWorkbook

    workbook = CalamineWorkbook.from_filelike(io.BytesIO(data))
    parts = []
    for name in workbook.sheet_names:
        rows = workbook.get_sheet_by_name(name).to_python(skip_empty_area=True)
        parts.append(f"# {name}\n\n" + _rows(rows))
    return Extracted("\n\n".join(parts), "")


def _csv(data: bytes) -> Extracted:
    rows: Iterable[Sequence[object]] = csv.reader(io.StringIO(_decoded(data)))
    return Extracted(_rows(rows), "")


def _rows(rows: Iterable[Sequence[object]]) -> str:
    """One line per row, each cell named by its column's header."""
    lines = []
    header: list[str] = []
    for number, row in enumerate(rows):
        if number >= MAX_ROWS:
            break
        cells = [_cell(cell) for cell in row]
        if not header:
            header = cells
            continue
        pairs = [
            f"{header[i] if i < len(header) and header[i] else f'column {i + 1}'}: {cell}"
            for i, cell in enumerate(cells)
            if cell
        ]
        if pairs:
            lines.append("; ".join(pairs))
    return "\n\n".join(lines)  # a paragraph each: passages hold whole rows


def _cell(value: object) -> str:
    """A cell as a person reads it: ``40`` for the 40.0 a sheet stores, "" for none."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


_READERS = {
    "text": _text,
    "markdown": _markdown,
    "html": _html,
    "pdf": _pdf,
    "docx": _docx,
    "xlsx": _xlsx,
    "csv": _csv,
}
