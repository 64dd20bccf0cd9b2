"""Writing a results file so that a reader, a kill or a crash never sees half of it; reading a file someone else could
have replaced (a named pipe, a device, a huge file) without hanging or filling memory; a process's own temporary
folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class NotRegularFile(OSError):
    """A path that is a folder, a named pipe, a device... where a file was to be read; ``strerror`` says which."""


class FileTooLarge(OSError):
    """A file larger than its reader's bound; ``strerror`` gives its size and the bound."""


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, for a message ("a named pipe (FIFO)")."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for reading in binary; NotRegularFile unless it is a regular file (a symbolic link is
    followed to what it names). Opened without blocking (a named pipe with no writer would wait for ever; the flag
    does nothing to a regular file) and judged on the open descriptor, so a file swapped after a look is judged too."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFile(0, f"is {file_kind(mode)}, not a regular file", str(path))
    return os.fdopen(fd, "rb")


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (``open_regular``), at most ``limit`` of them: FileTooLarge for a
    longer one, read no further than ``limit`` + 1 bytes."""
    with open_regular(path) as f:
        data = f.read(limit + 1)
        size = max(os.fstat(f.fileno()).st_size, len(data))
    if len(data) > limit:
        raise FileTooLarge(0, f"is {size} bytes, more than the {limit} it may hold", str(path))
    return data


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
