"""How the command line reports a user's mistake: one message, exit code 2, no traceback."""

from __future__ import annotations

import sys

USAGE_ERROR = 2


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return USAGE_ERROR
