"""How the command line reports a user's mistake: one message, exit code 2, no traceback."""

from __future__ import annotations

import sys
from typing import Sequence

from core.config.fields import shorten

USAGE_ERROR = 2


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return USAGE_ERROR


def config_error(stack: str, problems: Sequence[str]) -> int:
    """``error: invalid config for stack 'dev':`` then one indented line per problem; exit code 2."""
    return fail(f"invalid config for stack {shorten(repr(stack), 120)}:\n  " + "\n  ".join(problems))
