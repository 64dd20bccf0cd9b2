"""Text from a run, made safe before a terminal sees it.

A summary's status, a folder name, a log line or an error from a pod can hold escape sequences
(``\\x1b]52;...`` writes the user's clipboard, others move the cursor or retitle the window). ``safe``
shows every control character (C0 but newline and tab, DEL, C1) as a Python escape (``\\x1b``), so the
text reads the same and does nothing. Every place the CLI prints text that came from a run goes
through it; rich's progress display, which writes its own control sequences, gets its text already safe.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: object) -> str:
    """``text`` (any value, as ``str``) with its control characters, but newline and tab, escaped."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def safe_line(text: object) -> str:
    """``safe``, and newlines too: for one value that must stay on one line (a name, a status)."""
    return safe(text).replace("\n", "\\n")
