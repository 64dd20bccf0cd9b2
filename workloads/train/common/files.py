"""Writing a results file so that a reader, a kill or a crash never sees half of it; a process's own temporary folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator


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


@contextlib.contextmanager
def own_tempdir(prefix: str = "eksbench-") -> Iterator[Path]:
    """A temporary folder of this process's own, the default of ``tempfile`` while inside, removed on the way out.

    For a process that leaves with ``os._exit`` (the TensorFlow worker): the atexit handlers it skips are what
    would remove the temporary files its libraries made (AutoGraph writes each function it converts to
    ``$TMPDIR/__autograph_generated_file*.py``, and deletes it only at exit)."""
    before = tempfile.tempdir
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = before
        shutil.rmtree(folder, ignore_errors=True)
