"""Child processes that cannot outlive ``bench``: a parent-death signal, and process-tree helpers.

``die_with_parent(sig)`` is a ``preexec_fn`` that asks Linux to send ``sig`` to the child when
the thread that started it dies (``prctl(PR_SET_PDEATHSIG)``, prctl(2)), so even ``kill -9``
of ``bench`` stops etcd and the launchers. The setting survives ``exec``. Where prctl is not
available (macOS) it does nothing and the normal teardown is all there is.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os.kill(os.getpid(), int(sig))

    return preexec


def children_map() -> dict[int, list[int]]:
    """ppid -> pids, from /proc (Linux); empty elsewhere."""
    out: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(d.name))
    return out


def descendants(pid: int) -> list[int]:
    children = children_map()
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    """True for a running process (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False
