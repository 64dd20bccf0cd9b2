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
of its output went away, ``bench run dev --local | head -3``, while the run went on; ``shared_cpu``: the other
local runs that trained beside it).

The markers tell a run that starts which other local runs of the project are live (``live_runs``): those share
this machine's CPU, and each measures less than it would alone. Only a marker whose pid lives, on this host, in a
process that started no later than the marker was written counts: a run killed with ``kill -9`` leaves its
marker, and its pid may since belong to another process.

On AWS the same protection is Pulumi's: a stack has one update at a time (the backend's stack lock),
and a run id whose S3 results hold a summary is refused by the preflight unless ``--resume``.
"""

from __future__ import annotations

import calendar
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from workloads.train.common.files import atomic_write, read_regular

MARKER = "_run.json"
MAX_PID = 2**22  # Linux's largest pid_max (proc(5), /proc/sys/kernel/pid_max)
MAX_MARKER_BYTES = 64 * 1024  # a marker is one line of under 200 bytes: a larger file (or a pipe) is not ours
STARTED_AT = "%Y-%m-%dT%H:%M:%SZ"  # the marker's started_at, UTC
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

    def running(self) -> bool:
        """True only when the holder is known to run now: its pid lives on this host, in a process started
        no later than the marker says (not a later process that reuses a dead run's pid)."""
        if self.pid is None or self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        started = process_start(self.pid)
        marked = _epoch(self.started_at)
        return started is None or marked is None or started <= marked + CLOCK_SLACK_S

    def describe(self) -> str:
        if self.pid is None:
            return f"its {MARKER} could not be read; if no run uses the folder, remove that file"
        return f"pid {self.pid} on {self.host}, started {self.started_at}"


CLOCK_SLACK_S = 2.0  # the marker's time is to the second; /proc's start time to a clock tick


def _epoch(iso: str | None) -> float | None:
    try:
        return calendar.timegm(time.strptime(iso or "", STARTED_AT))
    except ValueError:
        return None


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch) from Linux's /proc (proc(5): ``stat`` field 22, in
    clock ticks since boot, and ``btime`` in /proc/stat); None where it cannot be told."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def live_runs(results_root: Path, *, besides: Path) -> list[tuple[str, Holder]]:
    """The other local runs under ``results_root`` (``<stack>/<run id>/``) that are running now, as
    (``<stack>/<run id>``, who holds it), ``besides`` (this run's folder) left out."""
    found = []
    for marker in sorted(results_root.glob(f"*/*/{MARKER}")):
        run_dir = marker.parent
        if run_dir.resolve() != besides.resolve() and (holder := read_holder(run_dir)).running():
            found.append((f"{run_dir.parent.name}/{run_dir.name}", holder))
    return found


def shared_cpu_flag(runs: list[tuple[str, Holder]]) -> str:
    """The flag and warning of a run that trains while ``runs`` do: each process gets part of the CPU."""
    named = ", ".join(f"{name} (pid {holder.pid})" for name, holder in runs)
    return (f"shared the CPU with local run{'s' if len(runs) > 1 else ''} {named}: its throughput is lower "
            "than the machine gives one run alone")


def flags_file(run_dir: Path) -> Path:
    """Where a run's launchers read the flags their summaries carry (``summary_fields.RUN_FLAGS_ENV``): under the
    run's ``_tmp``, which goes at its teardown, after the launchers wrote their summaries."""
    return run_dir / "_tmp" / "run-flags"


def _add_flag(path: Path, flag: str) -> None:
    """Append ``flag`` as a line of ``path`` (a run's ``flags_file``; another run's may start its ``_tmp``
    before that run's provision does)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(flag + "\n")
    except OSError:
        pass


def note_shared_cpu(results_root: Path, run_dir: Path, run_name: str) -> str | None:
    """When other local runs of the project are running: the flag of this run (``run_name``: ``<stack>/<run id>``),
    also in its record and given to its launchers; each of those runs gets this one's in its own launchers'
    flags (the CPU is shared both ways). None, and nothing written, when this run is alone."""
    flags_file(run_dir).unlink(missing_ok=True)  # a killed run's, kept in a folder --resume takes over
    others = live_runs(results_root, besides=run_dir)
    if not others:
        return None
    flag = shared_cpu_flag(others)
    _add_flag(flags_file(run_dir), flag)
    record(run_dir, shared_cpu=flag)
    me = Holder(os.getpid(), socket.gethostname(), time.strftime(STARTED_AT, time.gmtime()))
    for name, _ in others:
        _add_flag(flags_file(results_root / name), shared_cpu_flag([(run_name, me)]))
    return flag


def read_holder(run_dir: Path) -> Holder:
    """The marker's holder; all None where the marker cannot be read or its pid is no process id (1e400, 10**23,
    0 or -1: ``os.kill`` of 0 or -1 would ask about a whole process group, not one run)."""
    try:
        doc = json.loads(read_regular(run_dir / MARKER, MAX_MARKER_BYTES))
        pid = int(doc["pid"])
        if not 1 <= pid <= MAX_PID:
            raise ValueError(pid)
        return Holder(pid, str(doc["host"]), str(doc["started_at"]))
    except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError):
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
                   "started_at": time.strftime(STARTED_AT, time.gmtime())}, f)
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
        doc = json.loads(read_regular(run_dir / MARKER, MAX_MARKER_BYTES))
        if isinstance(doc, dict):
            text = json.dumps({**doc, **fields}).encode()
            atomic_write(run_dir / MARKER, lambda f: f.write(text))
    except (OSError, ValueError, RecursionError):
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
