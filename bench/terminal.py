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


def results_table(rows: Sequence[dict]) -> str:
    """Fixed-width table of experiment, status, shape, steps, samples/s, wall time, path."""
    head = ("experiment", "status", "nodes x procs", "steps", "samples/s", "per proc", "wall s", "accuracy",
            "results")
    # a status, a name or a path can come from a run: one line each, control characters escaped
    body = [tuple("-" if row.get(k) is None else safe_line(row.get(k)) for k in
                  ("experiment", "status", "shape", "steps", "total", "per_process", "wall", "accuracy", "path"))
            for row in rows]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(head), fmt(tuple("-" * w for w in widths)), *map(fmt, body)])
