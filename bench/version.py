"""What ``eksbench --version`` says: the package's version and, run from a git checkout, its commit.

Results and bug reports name the code that made them: the version alone is the same for every commit of a checkout,
so a checkout adds its short commit hash, with ``-dirty`` where tracked files have changes (``git describe
--dirty``). An installed copy outside a checkout says the version alone. One git call, only when asked.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench import __version__

CHECKOUT = Path(__file__).resolve().parents[1]  # the folder holding bench/: a git checkout, or site-packages


def commit(root: Path = CHECKOUT) -> str | None:
    """The short commit hash of the checkout at ``root`` (with ``-dirty``), or None where it is none or git is
    missing. ``--exclude=*`` leaves tags out, so it is the hash whatever the tags."""
    if not (root / ".git").exists():  # a folder in a clone, or a file in a worktree
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty", "--exclude=*"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def version_text(root: Path = CHECKOUT) -> str:
    """``eksbench 0.1.0 (git ce81ce9-dirty)``, or ``eksbench 0.1.0`` outside a checkout."""
    found = commit(root)
    return f"eksbench {__version__}" + (f" (git {found})" if found else "")
