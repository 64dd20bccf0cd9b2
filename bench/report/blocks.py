"""Pieces of the report page that its section modules share without importing the page itself.

A section with nothing to show is one line, its title and why, not a heading over an empty paragraph, and the
page gathers such lines after the sections that show something: a local run's page would otherwise open with a
column of empty sections before its first figure.

Every text on the page goes through ``esc``: the characters a terminal is kept from (``bench.terminal.safe``:
controls, bidirectional overrides and isolates, zero-width characters) show as their escapes (``\\u202e``)
in the page too, where they would reorder or hide a status or a folder name, and then HTML's own.
"""

from __future__ import annotations

import html

from bench.terminal import safe

EMPTY_CLASS = "empty"


def esc(value: object) -> str:
    """``value`` as page text: ``bench.terminal.safe``'s escapes, then ``<&>`` and quotes (HTML spec 13.1.2.3)."""
    return html.escape(safe(value), quote=True)


def attr(value: str) -> str:
    """A value for inside a double-quoted attribute: quotes and ``<&>`` escaped (HTML spec 13.1.2.3)."""
    return esc(value)


def figure(fig, alt: str, empty: str) -> str:
    from bench.report.figures import png_data_uri

    if fig is None:
        return f'<p class="note">{esc(empty)}</p>'
    src = png_data_uri(fig)
    if not src.startswith("data:image/png;base64,"):  # the one kind of URL the page has (and its CSP allows)
        raise ValueError("a figure must be a PNG data: URI")
    return f'<img class="plot" alt="{attr(alt)}" src="{attr(src)}">'


class EmptySection(str):
    """A section's one line saying why it has nothing to show (``bench.report.page`` gathers them at the end)."""


def empty_section(title: str, why: str) -> EmptySection:
    return EmptySection(f"<p class='{EMPTY_CLASS}'><b>{esc(title)}:</b> {esc(why)}</p>")
