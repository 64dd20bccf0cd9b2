"""Two ways a user's machine stops a command's writes, made deterministic for tests of any layer.

- A reader that went away (``eksbench status | head -1``): ``closed_pipe`` gives the write end of a pipe whose
  read end is already closed, so the first write gets EPIPE, as it does once ``head`` has exited.
- A disk that fills part-way: ``file_size_limit`` (in this process) and ``limit_file_size`` (a child's
  ``preexec_fn``) set RLIMIT_FSIZE, so a write past ``limit`` bytes fails with EFBIG, "File too large" (Errno 27),
  the error a full quota gives. SIGXFSZ is ignored first: its default action kills the process instead
  (setrlimit(2): "the process is sent a SIGXFSZ signal ... if it is ignored, the system call fails with EFBIG").
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
from typing import Callable, Iterator, Sequence


@contextlib.contextmanager
def closed_pipe() -> Iterator[int]:
    """The write end of a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        yield write
    finally:
        os.close(write)


def run_into_closed_pipe(argv: Sequence[str], *, stderr_too: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """``argv`` with stdout (and with ``stderr_too`` stderr: ``2>&1 | head``) a pipe whose reader has gone;
    stderr otherwise captured as text."""
    with closed_pipe() as fd:
        return subprocess.run(list(argv), stdout=fd, stderr=fd if stderr_too else subprocess.PIPE, text=True,
                              **kwargs)


def limit_file_size(limit: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child can write no file past ``limit`` bytes (EFBIG)."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return apply


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """In this process, for the block: no file written past ``limit`` bytes (EFBIG); the limits restored after."""
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, previous[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous)
        signal.signal(signal.SIGXFSZ, previous_handler)
