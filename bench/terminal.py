"""Text from a run, made safe before a terminal sees it.

A summary's status, a folder name, a log line or an error from a pod can hold escape sequences
(``\\x1b]52;...`` writes the user's clipboard, others move the cursor or retitle the window), and
characters that show nothing yet change what is shown: a right-to-left override (U+202E) makes
``succ\\u202eeded`` read as something else, a zero-width space (U+200B) makes two names look alike. ``safe``
shows each such character as a Python escape (``\\x1b``, ``\\u202e``), so the text reads the same and
does nothing: controls (C0 but newline and tab, DEL, C1), Unicode's format characters (category Cf: the
bidirectional embeddings, overrides, isolates and marks, zero-width spaces and joiners, the byte-order
mark U+FEFF), the line and paragraph separators, and surrogates (a file name's undecodable byte, which
no terminal encoding can print). Every place the CLI prints text that came from a run goes through it,
and the report escapes the same characters (``bench.report.blocks.esc``); rich's progress display,
which writes its own control sequences, gets its text already safe.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Sequence

# Anything but printable ASCII, newline and tab is looked at (most run text never gets past this), and
# escaped when its Unicode category is one that a terminal does not draw as a glyph of its own.
_SUSPECT = re.compile(r"[^\t\n\x20-\x7e]")
HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, formats, surrogates, line/paragraph separators


def escaped(ch: str) -> str:
    """One character as Python writes it in a string literal: ``\\x1b``, ``\\u202e``, ``\\U000e0001``."""
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def _visible(m: re.Match) -> str:
    ch = m.group()
    return escaped(ch) if unicodedata.category(ch) in HIDDEN else ch


def safe(text: object) -> str:
    """``text`` (any value, as ``str``) with every character that is not drawn (controls but newline and tab,
    bidirectional and zero-width characters, surrogates) escaped as it would be written in Python."""
    return _SUSPECT.sub(_visible, str(text))


def safe_line(text: object, limit: int | None = None) -> str:
    """``safe``, and newlines too: for one value that must stay on one line (a name, a status); ``limit``:
    cut to that many characters first, with "…" where it was cut."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return safe(text).replace("\n", "\\n")


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: whole when it fits, else cut at the last space that leaves room
    for "…" (mid-word only where one word is longer than ``width``), trailing punctuation dropped."""
    if len(text) <= width:
        return text
    head = text[:width - 1]
    if head[-1:].isalnum() and text[width - 1].isalnum():  # the cut falls inside a word: back to its start
        cut = head.rfind(" ")
        head = head[:cut] if cut > 0 else head
    return head.rstrip(" ,;:(-") + "…"


def show(path: Path) -> str:
    """A path as the user would type it: relative to the working folder when it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def duration(seconds: object) -> str:
    """A wall time as a person reads it: ``42s``, ``1m 23s``, ``2h 05m``; ``-`` when it is not a number."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e9:
        return "-"
    s = round(seconds)
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def bandwidth(gbps: float) -> str:
    """``1.28 GB/s busbw``: the all-reduce workload's figure (GB of 10^9 bytes, as nccl-tests counts)."""
    figure = f"{gbps:.0f}" if gbps >= 100 else f"{gbps:.2f}" if gbps >= 1 else f"{gbps:.3g}"
    return f"{figure} GB/s busbw"


def throughput(row: dict) -> str:
    """A row's throughput cell: its peak bus bandwidth (all-reduce), else samples/s; ``-`` when neither."""
    if row.get("busbw_peak_gbps") is not None:
        return bandwidth(row["busbw_peak_gbps"])
    rate = row.get("samples_per_s")
    return "-" if rate is None else f"{rate:,.1f} samples/s"


def energy(row: dict) -> str:
    """A row's energy per result: ``2.13 J/sample, 0.0042 kWh``; ``-`` where the run measured no power."""
    per, kwh = row.get("joules_per_sample"), row.get("kwh")
    parts = ([f"{per:.3g} J/sample"] if per is not None else []) + ([f"{kwh:.3g} kWh"] if kwh is not None else [])
    return ", ".join(parts) or "-"


def with_energy(head: Sequence[str], body: Sequence[Sequence[object]], column: int = -2) -> tuple[list, list]:
    """(head, body) without the energy column (``column``) where no row measured energy: runs without telemetry."""
    if any(r[column] != "-" for r in body):
        return list(head), [list(r) for r in body]
    drop = lambda r: [c for i, c in enumerate(r) if i != len(r) + column]  # noqa: E731
    return drop(head), [drop(r) for r in body]


def table(head: Sequence[str], body: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell, a header and a rule; each cell one safe line (text from a run)."""
    cells = [tuple(map(safe_line, head)), *(tuple("-" if c is None else safe_line(c) for c in r) for r in body)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(cells[0]), fmt(tuple("-" * w for w in widths)), *map(fmt, cells[1:])])


def rate(row: dict) -> tuple[object, object]:
    """(the run's rate, per process): an all-reduce's peak bus bandwidth; a language model's tokens/s (its samples
    are sequences of any length); else samples/s."""
    if row.get("busbw_peak_gbps") is not None:
        return bandwidth(row["busbw_peak_gbps"]), row.get("per_process")
    if row.get("tokens_per_s") is not None:
        per = row.get("tokens_per_s_per_device")
        return f"{row['tokens_per_s']:,.0f} tokens/s", None if per is None else f"{per:,.0f} tokens/s"
    return row.get("total"), row.get("per_process")


def quality(row: dict) -> object:
    """The run's accuracy, or a language model's last validation loss (``val loss 3.31``)."""
    return f"val loss {row['val_loss']:.3g}" if row.get("val_loss") is not None else row.get("accuracy")


def results_table(rows: Sequence[dict]) -> str:
    """Fixed-width table of experiment, status, shape, steps, samples/s, wall time, energy per result, path. An
    all-reduce row (``busbw_peak_gbps``) shows its peak bus bandwidth where the others show samples/s, and no steps;
    a language model's row its tokens/s and its last validation loss."""
    head = ("experiment", "status", "nodes x procs", "steps", "samples/s", "per proc", "wall s", "accuracy",
            "energy", "results")
    body = [(row.get("experiment"), row.get("status"), row.get("shape"), row.get("steps"), rate(row)[0],
             rate(row)[1], row.get("wall"), quality(row), energy(row), row.get("path")) for row in rows]
    return table(*with_energy(head, body))
