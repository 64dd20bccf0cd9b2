"""Child processes that cannot outlive ``bench``, and process-tree helpers.

``die_with_parent(sig)`` (workloads/train/common/parent_death.py, shared with the trainer's DALI readers) is a
``preexec_fn`` that asks Linux to send ``sig`` to the child when the thread that started it dies, so even
``kill -9`` of ``bench`` stops etcd and the launchers.
"""

from __future__ import annotations

import os
from pathlib import Path

from workloads.train.common.parent_death import die_with_parent  # noqa: F401 - bench's processes use it from here


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
