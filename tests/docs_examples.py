"""The code examples of the manual (README.md, docs/): found, with their markers.

A ``sh``/``bash``/``python`` block is an example and needs a marker on the line before
it, which says how ``make test`` runs it:

- ``<!-- example: run -->``: tests/test_docs.py runs it against a service on the fake
  provider (a Python example of the stock E2B SDK: on Docker);
- ``<!-- example: run on docker -->``: the same against a service on Docker;
- ``<!-- example: serves -->``: it starts servers; tests/test_docs.py starts it, waits
  until every service it starts answers ``/healthz``, and stops it;
- ``<!-- example: run by tests/FILE.py -->``: that test runs it, read from the page
  with ``docs_example`` (it needs what test_docs has not, e.g. the service image);
- ``<!-- example: not-run (why) -->``: what cannot run here, and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import REPO

REFERENCE = REPO / "docs" / "reference"
EXAMPLE_LANGUAGES = {"sh", "bash", "shell", "python", "py"}
MARKER = re.compile(
    r"<!-- example: (run|run on docker|serves|run by (?P<by>tests/\S+\.py)|not-run)"
    r"(?: \((?P<reason>.+)\))? -->"
)
FENCE = re.compile(r"^```(\S*)")


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    language: str
    code: str
    marker: str | None
    """``run``, ``run on docker``, ``serves``, ``run by``, ``not-run`` or None (unmarked)."""
    reason: str | None
    by: str | None
    """The test file that runs a ``run by`` example."""

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def python(self) -> bool:
        return self.language in ("python", "py")

    @property
    def needs_sandbox(self) -> bool:
        """The stock e2b SDK runs processes, which the fake provider does not: these
        run against a service on Docker, in a namespace of their own."""
        return self.marker == "run on docker" or (self.python and "from e2b import" in self.code)


def manual_pages() -> list[Path]:
    """The written pages (the generated references are the generator's business)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [page for page in pages if not page.is_relative_to(REFERENCE)]


def page_examples(page: Path) -> list[Example]:
    found = []
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        language = opening.group(1)
        if language in EXAMPLE_LANGUAGES:
            before = next((line for line in reversed(lines[:index]) if line.strip()), "")
            marker = MARKER.fullmatch(before.strip())
            kind = marker.group(1) if marker else None
            found.append(
                Example(
                    page,
                    index + 1,
                    language,
                    "\n".join(lines[index + 1 : end]) + "\n",
                    "run by" if marker and marker.group("by") else kind,
                    marker.group("reason") if marker else None,
                    marker.group("by") if marker else None,
                )
            )
        index = end + 1
    return found


def examples() -> list[Example]:
    return [example for page in manual_pages() for example in page_examples(page)]


def docs_example(page: str, first_line: str) -> str:
    """The code of the example on ``page`` (relative to the repository) whose first line
    starts with ``first_line``: what a ``run by`` test runs, as the page says it."""
    matching = [
        example
        for example in page_examples(REPO / page)
        if example.code.startswith(first_line) and example.marker == "run by"
    ]
    assert len(matching) == 1, f"{page}: {len(matching)} 'run by' examples start {first_line!r}"
    return matching[0].code
