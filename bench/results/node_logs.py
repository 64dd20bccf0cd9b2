"""Reading an experiment's node logs, wherever they are (a local run's files, S3, the cluster): which
node a log is, and where the last lines of a log begin.

A node log is ``logs/<node id>.log`` (``node-0``, ``node-1``: the launcher's ``--node-id``, from the
Indexed Job's completion index on the cluster), or ``repeat_<k>/logs/<node id>.log`` for one repeat.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.results.safe_paths import LINE_CHUNK
from core.contract.names import node_name


def node_filter(names: list[str], node: str | None, where: str) -> Callable[[str], bool]:
    """Which logs ``--node`` keeps: ``node-1`` (or ``1``) is node-1's log, each repeat's too
    (``repeat_2/node-1``); a node none of ``names`` has is a ValueError naming the nodes there."""
    if node is None:
        return lambda _name: True
    want = node_name(int(node)) if node.isdigit() else node
    keep = lambda name: name.rsplit("/", 1)[-1] == want  # noqa: E731
    if not any(keep(n) for n in names):
        nodes = sorted({n.rsplit("/", 1)[-1] for n in names})
        raise ValueError(f"no node {want!r} in the logs of {where}; nodes: {', '.join(nodes) or '(none yet)'}")
    return keep


def tail_start(f: Any, size: int, lines: int) -> int:
    """The offset in ``f`` (a binary file of ``size`` bytes) where its last ``lines`` lines begin, read
    backwards a chunk at a time (a 200 MB log is never read whole to show its end)."""
    if lines <= 0:
        return size
    end = size
    if size:
        f.seek(size - 1)
        end = size - 1 if f.read(1) == b"\n" else size  # the last newline ends the last line
    count, pos = 0, end
    while pos > 0:
        step = min(LINE_CHUNK, pos)
        pos -= step
        f.seek(pos)
        block = f.read(step)
        i = len(block)
        while (i := block.rfind(b"\n", 0, i)) >= 0:
            count += 1
            if count == lines:
                return pos + i + 1
    return 0
