"""Writing a results file so that a reader, a kill or a crash never sees half of it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable


def atomic_write(path: str | Path, write: Callable[[Any], None]) -> Path:
    """Call ``write(file)`` on a temp file next to ``path``, then atomically replace ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    try:  # make the rename itself durable (best effort; not every file system allows it)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return path
