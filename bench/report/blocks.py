"""Pieces of the report page that its section modules share without importing the page itself.

A section with nothing to show is one line, its title and why, not a heading over an empty paragraph: a local
run's page would otherwise open with a column of empty sections before its first figure.
"""

from __future__ import annotations

import html

EMPTY_CLASS = "empty"


def empty_section(title: str, why: str) -> str:
    return f"<p class='{EMPTY_CLASS}'><b>{html.escape(title)}:</b> {html.escape(why)}</p>"
