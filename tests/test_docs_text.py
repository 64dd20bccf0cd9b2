"""Every prose paragraph of the README and docs/ ends as a sentence does: none stops mid-sentence."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENDS = re.compile(r"[.:!?)`*>|]$")  # a sentence, a list's lead-in, a closing bracket, code or emphasis


def prose_paragraphs(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each paragraph outside code fences, headings, tables and HTML."""
    found, current, start, fenced = [], [], 0, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            found.append((start, current))
            fenced, current = not fenced, []
            continue
        if fenced:
            continue
        if line.strip():
            start = start if current else number
            current.append(line)
        elif current:
            found.append((start, current))
            current = []
    found.append((start, current))
    return [(n, lines) for n, lines in found if lines and not lines[0].lstrip().startswith(("#", "|", "<", "!", "["))]


def unfinished(text: str) -> list[int]:
    return [n for n, lines in prose_paragraphs(text) if not ENDS.search(lines[-1].rstrip())]


def test_the_check_finds_a_paragraph_that_stops_mid_sentence():
    assert unfinished("One.\n\nTwo lines\nthat stop\n\n```\nno end\n```\n| a | b\n\n- item:\n") == [3]


def test_no_paragraph_stops_mid_sentence():
    found = [f"{p.relative_to(ROOT)}:{n}" for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
             for n in unfinished(p.read_text())]
    assert not found, "paragraphs that stop mid-sentence: " + ", ".join(found)
