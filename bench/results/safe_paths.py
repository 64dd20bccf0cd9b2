"""Opening a file by a relative name that came from a run (an S3 key, a file name), never outside its root.

The name is checked first with the one relative-path rule the manifests use
(``datasets.file_checks.relative_path_problem``: no empty, "." or ".." components, no
leading "/", no backslash, no control character), then opened one component at a time
from a descriptor of the root with ``O_NOFOLLOW``, so a symlink on the way (planted by an
earlier key, or already there) is refused rather than followed (open(2): "If the trailing
component of pathname is a symbolic link, then the open fails, with the error ELOOP";
https://man7.org/linux/man-pages/man2/open.2.html). The root itself is the caller's own
folder and is opened as it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import IO, Iterator

from datasets.file_checks import relative_path_problem


class UnsafePath(ValueError):
    """A name that would leave its root, or meets a symlink or a non-folder on the way."""


def _dir_flags() -> int:
    return os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _structure_problem(rel: str) -> str:
    if rel.startswith("/") or any(p in ("", ".", "..") for p in rel.split("/")):
        return f"path {rel!r} is absolute or has an empty, '.' or '..' component"
    return ""


@contextlib.contextmanager
def open_under(root: str | Path, rel: str, flags: int, *, make_dirs: bool = False, mode: int = 0o644,
               names_from_disk: bool = False) -> Iterator[IO[bytes]]:
    """``rel`` under ``root`` opened with ``flags`` (plus O_NOFOLLOW) as a binary file object.

    With ``make_dirs``, missing folders on the way are created (0o755). Raises UnsafePath
    naming ``rel`` when it breaks the rule or meets a symlink or a file where a folder must be.
    ``names_from_disk``: ``rel`` was listed from the file system under ``root`` (a local results
    tree), so a backslash or a control character is a real name there, not a way out; only the
    structure is checked (relative, no empty, "." or ".." component).
    """
    problem = _structure_problem(rel) if names_from_disk else relative_path_problem(rel)
    if problem:
        raise UnsafePath(problem)
    *folders, leaf = rel.split("/")
    fd = os.open(str(root), os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for part in folders:
            if make_dirs:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                nxt = os.open(part, _dir_flags(), dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(f"path {rel!r}: {part!r} is a symlink or not a folder") from None
                raise
            os.close(fd)
            fd = nxt
        try:
            # O_NONBLOCK: a FIFO planted under the name must not hang the reader (no effect on regular files)
            leaf_fd = os.open(leaf, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode,
                              dir_fd=fd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise UnsafePath(f"path {rel!r}: {leaf!r} is a symlink, a folder or a pipe") from None
            raise
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(leaf_fd).st_mode):
        os.close(leaf_fd)
        raise UnsafePath(f"path {rel!r}: {leaf!r} is not a regular file")
    with os.fdopen(leaf_fd, "rb" if (flags & os.O_ACCMODE) == os.O_RDONLY else "wb") as f:
        yield f


LINE_CHUNK = 64 * 1024  # bytes read at a time when streaming lines
MAX_LINE = 16 * 1024  # bytes shown of one log line; the rest is cut with a note (bench.results.node_logs)


def read_under(root: str | Path, rel: str, limit: int, *, names_from_disk: bool = True) -> bytes:
    """At most ``limit`` bytes of ``rel`` under ``root`` (``open_under``'s rules: no link, no pipe, no device)."""
    with open_under(root, rel, os.O_RDONLY, names_from_disk=names_from_disk) as f:
        return f.read(limit)
