"""Text from a run, made safe before a terminal sees it.

A summary's status, a folder name, a log line or an error from a pod can hold escape sequences
(``\\x1b]52;...`` writes the user's clipboard, others move the cursor or retitle the window). ``safe``
shows every control character (C0 but newline and tab, DEL, C1) as a Python escape (``\\x1b``), so the
text reads the same and does nothing. Every place the CLI prints text that came from a run goes
through it; rich's progress display, which writes its own control sequences, gets its text already safe.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: object) -> str:
    """``text`` (any value, as ``str``) with its control characters, but newline and tab, escaped."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def safe_line(text: object) -> str:
    """``safe``, and newlines too: for one value that must stay on one line (a name, a status)."""
    return safe(text).replace("\n", "\\n")


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


def table(head: Sequence[str], body: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell, a header and a rule; each cell one safe line (text from a run)."""
    cells = [tuple(map(safe_line, head)), *(tuple("-" if c is None else safe_line(c) for c in r) for r in body)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(cells[0]), fmt(tuple("-" * w for w in widths)), *map(fmt, cells[1:])])


def results_table(rows: Sequence[dict]) -> str:
    """Fixed-width table of experiment, status, shape, steps, samples/s, wall time, path. An all-reduce row
    (``busbw_peak_gbps``) shows its peak bus bandwidth where the others show samples/s, and no steps."""
    head = ("experiment", "status", "nodes x procs", "steps", "samples/s", "per proc", "wall s", "accuracy",
            "results")
    body = [(row.get("experiment"), row.get("status"), row.get("shape"), row.get("steps"),
             bandwidth(row["busbw_peak_gbps"]) if row.get("busbw_peak_gbps") is not None else row.get("total"),
             row.get("per_process"), row.get("wall"), row.get("accuracy"), row.get("path")) for row in rows]
    return table(head, body)
