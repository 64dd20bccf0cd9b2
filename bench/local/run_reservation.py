"""One run, one folder: a local run's id is reserved by an exclusive create before anything is written.

Two ``bench run <stack> --local`` started in the same second once got the same default id (a UTC
timestamp), wrote into one folder and both said ``succeeded``, with one summary over both runs'
processes. Now each run first creates ``<run dir>/_run.json`` with ``O_CREAT | O_EXCL`` (atomic on a
local file system: exactly one creator wins) holding its pid, host and start time:

- a default id that is taken moves on to ``<id>-2``, ``<id>-3``, ...;
- an explicit ``--run-id`` that a live run holds is refused in one line; one left by a run that is
  gone (killed before it could finish) is taken over, by renaming the old marker away first (a rename
  has one winner too), as ``--resume`` takes over a finished one.

The marker is the run's record too: ``record`` adds what the run learnt of itself (``output``: when the reader
of its output went away, ``bench run dev --local | head -3``, while the run went on).

On AWS the same protection is Pulumi's: a stack has one update at a time (the backend's stack lock),
and a run id whose S3 results hold a summary is refused by the preflight unless ``--resume``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from workloads.train.common.files import atomic_write

MARKER = "_run.json"
MAX_SUFFIX = 99


@dataclass(frozen=True)
class Holder:
    """Who holds a run folder, as its marker says."""
    pid: int | None
    host: str | None
    started_at: str | None

    def alive(self) -> bool:
        """True when the holder may still be running: its pid lives on this host (or the marker is unreadable)."""
        if self.pid is None or self.host != socket.gethostname():
            return True  # a marker being written (or damaged), or a run on another machine sharing the disk
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def describe(self) -> str:
        if self.pid is None:
            return f"its {MARKER} could not be read; if no run uses the folder, remove that file"
        return f"pid {self.pid} on {self.host}, started {self.started_at}"


def read_holder(run_dir: Path) -> Holder:
    try:
        doc = json.loads((run_dir / MARKER).read_text())
        return Holder(int(doc["pid"]), str(doc["host"]), str(doc["started_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Holder(None, None, None)


def _create(run_dir: Path) -> bool:
    """Create the marker exclusively; False when it is already there."""
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(run_dir / MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(),
                   "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)
    return True


def _take_over(run_dir: Path) -> bool:
    """Move a gone run's marker aside and create ours; False when another run got there first."""
    try:
        os.rename(run_dir / MARKER, run_dir / f"{MARKER}.{os.getpid()}.old")
    except FileNotFoundError:
        pass  # another taker renamed it: race it for the create
    return _create(run_dir)


def record(run_dir: Path, **fields: str) -> None:
    """Add ``fields`` to the run's marker, its record beside the experiments (``output``: why its output stopped
    before its end), replaced atomically; a marker that cannot be read or written is left as it is."""
    try:
        doc = json.loads((run_dir / MARKER).read_text())
        if isinstance(doc, dict):
            text = json.dumps({**doc, **fields}).encode()
            atomic_write(run_dir / MARKER, lambda f: f.write(text))
    except (OSError, ValueError):
        pass


class RunTaken(Exception):
    """The run id is held by another run; the message says by whom and what to do (one line)."""


def reserve(run_dir_for: Callable[[str], Path], run_id: str, *, explicit: bool, resume: bool) -> tuple[str, Path]:
    """(run id, run folder) reserved for this process. ``explicit``: the user chose ``run_id``, so it is
    never changed; ``resume``: the user asked to continue that run."""
    candidates = [run_id] if explicit or resume else [run_id, *(f"{run_id}-{k}" for k in range(2, MAX_SUFFIX + 1))]
    for candidate in candidates:
        run_dir = run_dir_for(candidate)
        if _create(run_dir):
            return candidate, run_dir
        holder = read_holder(run_dir)
        if not holder.alive() and (explicit or resume) and _take_over(run_dir):
            return candidate, run_dir
        if explicit or resume:
            raise RunTaken(f"run {candidate} is in use by another eksbench run ({holder.describe()}) in {run_dir}: "
                           "wait for it, or pick another --run-id")
    raise RunTaken(f"run ids {run_id} to {run_id}-{MAX_SUFFIX} are all taken: pass --run-id")
