"""Passages that keep their headings: cut at headings, packed up to the size, the end
of one repeated at the start of the next, each pointing at where it begins."""

from __future__ import annotations

import itertools

from runtime.knowledge.chunking import embedding_text, passages

DOC = """# Guide

Intro paragraph.

## Install

### Linux

Run the installer.
It asks for sudo.

Then reboot.

### Windows

Double click setup.

# Appendix

Last words.
"""


def test_each_passage_carries_its_heading_trail_and_never_crosses_a_heading() -> None:
    found = passages(DOC, 1000, 100)
    assert [(p.heading, p.text) for p in found] == [
        ("Guide", "Intro paragraph."),
        ("Guide > Install > Linux", "Run the installer. It asks for sudo.\n\nThen reboot."),
        ("Guide > Install > Windows", "Double click setup."),
        ("Appendix", "Last words."),  # a new top heading drops the old trail
    ]
    for p in found:
        assert DOC[p.start :].startswith(p.text.split("\n")[0][:10]), p


def test_a_long_section_is_packed_with_overlap() -> None:
    paragraphs = [f"Paragraph {n} " + "word " * 20 for n in range(12)]
    found = passages("# T\n\n" + "\n\n".join(paragraphs), 300, 120)
    assert len(found) > 3
    assert all(len(p.text) <= 300 for p in found)
    for before, after in itertools.pairwise(found):
        last = before.text.split("\n\n")[-1]
        assert after.text.startswith(last)  # the next begins with the last paragraph
    texts = "\n\n".join(p.text for p in found)
    assert all(paragraph.strip() in texts for paragraph in paragraphs)  # nothing lost


def test_a_paragraph_longer_than_a_passage_is_cut_at_sentences() -> None:
    sentences = [f"Sentence number {n} says something plain." for n in range(40)]
    found = passages(" ".join(sentences), 200, 50)
    assert all(len(p.text) <= 200 for p in found)
    assert found[0].text.startswith("Sentence number 0") and found[0].start == 0
    assert found[-1].text.endswith("Sentence number 39 says something plain.")
    joined = " ".join(p.text for p in found)
    assert all(s in joined for s in sentences)


def test_a_passages_vector_weighs_its_own_heading() -> None:
    (linux,) = [p for p in passages(DOC, 1000, 0) if p.heading.endswith("Linux")]
    assert embedding_text(linux).startswith("Linux. Linux. Linux. Guide > Install > Linux\n")
