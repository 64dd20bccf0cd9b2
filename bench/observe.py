"""``python -m bench status <stack>`` and ``python -m bench logs <stack> <experiment>`` (filled in below)."""

from __future__ import annotations


def register(sub) -> None:
    pass
