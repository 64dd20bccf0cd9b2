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
import secrets
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
    fd, leaf = _folder_of(root, rel, make_dirs=make_dirs, names_from_disk=names_from_disk)
    try:
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


def _folder_of(root: str | Path, rel: str, *, make_dirs: bool, names_from_disk: bool = False) -> tuple[int, str]:
    """(a descriptor of the folder ``rel``'s file is in, the file's name): ``rel`` checked, then its folders
    opened one at a time from ``root`` with O_NOFOLLOW (``make_dirs``: made where missing). The caller closes it."""
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
    except BaseException:
        os.close(fd)
        raise
    return fd, leaf


@contextlib.contextmanager
def replace_under(root: str | Path, rel: str, *, mode: int = 0o644) -> Iterator[IO[bytes]]:
    """A new file for ``rel`` under ``root`` (``open_under``'s rules; missing folders made), written under a
    temporary name beside it and renamed over ``rel`` when the block ends, removed when it raises: a copy that
    fails half-way leaves the file that was there whole. What ``workloads.train.common.files.atomic_write``
    does for a path of our own, done here from the folder's descriptor, so no link on the way is followed."""
    fd, leaf = _folder_of(root, rel, make_dirs=True)
    tmp = f".{secrets.token_hex(6)}.tmp"
    try:
        try:
            there = os.stat(leaf, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            there = None
        if there is not None and not stat.S_ISREG(there.st_mode):
            raise UnsafePath(f"path {rel!r}: {leaf!r} is a symlink, a folder or a pipe")
        tmp_fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         mode, dir_fd=fd)
        try:
            with os.fdopen(tmp_fd, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, leaf, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=fd)
    finally:
        os.close(fd)


LINE_CHUNK = 64 * 1024  # bytes read at a time when streaming lines
MAX_LINE = 16 * 1024  # bytes shown of one log line; the rest is cut with a note (bench.results.node_logs)


def read_under(root: str | Path, rel: str, limit: int, *, names_from_disk: bool = True) -> bytes:
    """At most ``limit`` bytes of ``rel`` under ``root`` (``open_under``'s rules: no link, no pipe, no device)."""
    with open_under(root, rel, os.O_RDONLY, names_from_disk=names_from_disk) as f:
        return f.read(limit)
