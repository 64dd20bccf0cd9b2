"""What the local backend knows of a stack without running it: ``status`` and ``logs`` of its local runs.

status: each local run of the stack under the results root (``<stack>/<run-id>/``) with each experiment's
    status (each repeat apart: ``<exp>/repeat_<k>/``), from its summary.json.
logs: an experiment's node logs of a run (default: the stack's latest), or one node's, from their last lines
    on, with the time each line was captured; ``follow`` tails them until the experiment's summary appears.

Every read stays in the results tree: never through a link, never from a pipe or a device, never more than
a summary's bound (``bench.results.safe_paths``). ``LocalBackend`` (bench/local/backend.py) takes these from
``LocalObservation``; it needs ``stack``, ``results_root``, ``project`` and ``repeats``, nothing of a run.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from bench.results.node_logs import LineTimes, node_filter, offset_lines, tail_start, time_text
from bench.results.overview import no_experiment, status_row
from bench.results.readers import MAX_JSON_BYTES
from bench.results.safe_paths import LINE_CHUNK, open_under, read_under
from core.contract.names import LOG_TIMES_SUFFIX, SUMMARY_FILE, node_log
from core.contract.results_location import (
    ResultsLocation,
    log_name,
    repeat_folder,
    repeat_number,
)


class LocalObservation:
    """``status`` and ``logs`` of a stack's local runs, for ``LocalBackend``."""

    stack: str
    results_root: Path
    project: str
    repeats: dict[str, int]

    def status(self) -> dict[str, Any]:
        """The stack's local runs: ``{"rows": [one bench.results.overview.status_row per experiment run]}``."""
        return {"rows": local_status_rows(self.results_root.resolve(), self.stack)}

    def logs(self, experiment: str, *, run_id: str | None = None, follow: bool = False, tail: int | None = None,
             node: str | None = None, timestamps: bool = False) -> Iterator[str]:
        """The experiment's node logs of ``run_id`` (default: its latest run), ``follow`` tailing them until
        its summary.json appears (its last repeat's, for ``repeats: N``); ``tail``: from each log's last
        ``tail`` lines; ``node``: one node's log (``node-1`` or ``1``); ``timestamps``: each line's time.
        FileNotFoundError (saying where it looked) when there is no such run; ValueError (naming the run's
        experiments) when the run lacks the experiment, or (naming the nodes there) a node that has none."""
        root = self.results_root.resolve()
        if run_id:
            run_dir = ResultsLocation(None, self.project, self.stack, run_id).local_dir(root)
        else:
            run_dir = latest_local_run(root, self.stack)
        if run_dir is None or not _folder(run_dir):
            where = self.results_root / self.stack
            raise FileNotFoundError(f"no run {run_id} under {where}" if run_id else f"not under {where}")
        exp_dir = run_dir / experiment
        if not _folder(exp_dir):
            raise ValueError(no_experiment(self.stack, run_dir.name, experiment, run_experiments(run_dir)))
        if not follow and not node_log_files(exp_dir):
            raise ValueError(f"run {run_dir.name} of stack {self.stack}: experiment {experiment!r} has no node logs "
                             "(it never started, or stopped before its launcher wrote one)")
        return local_logs(exp_dir, follow, repeats=self.repeats.get(experiment, 1), tail=tail, node=node,
                          timestamps=timestamps)


def local_status_rows(results_root: Path, stack: str) -> list[dict[str, Any]]:
    """One ``bench.results.overview.status_row`` per experiment of each local run of the stack (each repeat
    apart: ``<exp>/repeat_<k>/``), runs by name; a summary that cannot be read is a warning and a row."""
    from bench.results.readers import read_summary

    rows: list[dict[str, Any]] = []
    base = results_root / stack
    if not base.is_dir():
        return rows
    for run in sorted(p for p in base.iterdir() if _folder(p)):
        for exp in sorted(p for p in run.iterdir() if _folder(p) and not p.name.startswith("_")):
            repeats = sorted((k, d) for d in exp.iterdir() if _folder(d) and (k := repeat_number(d.name)))
            for k, folder in (repeats or [(None, exp)]):
                rel = f"{folder.relative_to(base).as_posix()}/{SUMMARY_FILE}"
                missing = None
                try:  # never through a link, never a pipe or a device, never more than a summary's bound
                    raw = read_under(base, rel, MAX_JSON_BYTES + 1)
                    summary = read_summary(raw, f"{folder}/{SUMMARY_FILE}") or {}
                except FileNotFoundError:
                    summary, missing = None, "running, or stopped before its launcher finished"
                except (OSError, ValueError) as e:
                    warnings.warn(f"{folder}/summary.json: {e}; ignored", stacklevel=2)
                    summary = {}
                rows.append(status_row(run=run.name, experiment=exp.name, repeat=k, summary=summary,
                                       results=str(folder), missing=missing))
    return rows


def local_runs(results_root: Path, stack: str) -> dict[str, dict[str, str]]:
    """Each local run of the stack with each experiment's status, and why it stopped when it did not succeed."""
    from bench.results.overview import by_run

    return by_run(local_status_rows(results_root, stack))


def _folder(path: Path) -> bool:
    """A real folder of the results tree: not a link (to anywhere), so a reader never leaves the tree."""
    return path.is_dir() and not path.is_symlink()


def latest_local_run(results_root: Path, stack: str) -> Path | None:
    """The stack's run folder changed last (a run adds its experiments' folders as it goes), None when none."""
    base = results_root / stack
    runs = sorted((p for p in base.iterdir() if _folder(p)), key=lambda p: p.stat().st_mtime) if _folder(base) else []
    return runs[-1] if runs else None


def run_experiments(run_dir: Path) -> list[str]:
    """The experiments a local run has: its folders, less its own (``_data``: names with "_" or "." first)."""
    return sorted(p.name for p in run_dir.iterdir() if _folder(p) and not p.name.startswith(("_", ".")))


def node_log_files(exp_dir: Path) -> list[tuple[str, Path]]:
    """The experiment's node logs, or each repeat's in order, as (path relative to ``exp_dir``, path): regular
    files only, never a link."""
    found = [*exp_dir.glob(node_log("*")), *exp_dir.glob(f"{repeat_folder('*')}/{node_log('*')}")]
    named = sorted((repeat_number(p.parent.parent.name) or 0, p) for p in found if p.is_file() and not p.is_symlink())
    return [(p.relative_to(exp_dir).as_posix(), p) for _, p in named]


def local_logs(exp_dir: Path, follow: bool, repeats: int = 1, *, tail: int | None = None,
               node: str | None = None, timestamps: bool = False) -> Iterator[str]:
    """The experiment's node logs, or each repeat's (``<exp>/repeat_<k>/logs/``) in order; ``follow`` tails
    them until the experiment's summary.json appears, or its last repeat's (``repeats`` > 1: each repeat
    writes its own, and none is written at the experiment's level). ``tail``: each log from its last
    ``tail`` lines on; ``node``: that node's log only (a ValueError, at once, when no log is that node's);
    ``timestamps``: each line after its node with the time the launcher captured it (its ``.times`` file)."""
    done = (exp_dir / repeat_folder(repeats) if repeats > 1 else exp_dir) / SUMMARY_FILE

    def logs() -> list[tuple[str, Path]]:
        return node_log_files(exp_dir)

    keep = node_filter([log_name(rel) or p.stem for rel, p in logs()], node, exp_dir.name) if node else None
    return _local_lines(exp_dir, logs, done, follow, tail, keep, timestamps)


def _file_chunks(root: Path, rel: str) -> Callable[[int], Iterator[bytes] | None]:
    """``LineTimes``'s reader of ``rel`` under ``root``: its bytes from a position on (None: no such file)."""
    def open_at(pos: int) -> Iterator[bytes] | None:
        if not (root / rel).is_file():
            return None

        def chunks() -> Iterator[bytes]:
            try:  # never through a link or from a pipe
                with open_under(root, rel, os.O_RDONLY, names_from_disk=True) as f:
                    f.seek(pos)
                    while chunk := f.read(LINE_CHUNK):
                        yield chunk
            except (OSError, ValueError):
                return
        return chunks()
    return open_at


def _local_lines(exp_dir: Path, logs: Callable[[], list[tuple[str, Path]]], done: Path, follow: bool,
                 tail: int | None, keep: Callable[[str], bool] | None, timestamps: bool) -> Iterator[str]:
    positions: dict[Path, int] = {}
    times: dict[Path, LineTimes] = {}
    while True:
        for rel, path in logs():
            name = log_name(rel) or path.stem
            if keep is not None and not keep(name):
                continue
            if timestamps and path not in times:
                times[path] = LineTimes(_file_chunks(exp_dir, rel + LOG_TIMES_SUFFIX), again=follow)
            try:  # streamed a chunk at a time, never through a link or from a pipe
                with open_under(exp_dir, rel, os.O_RDONLY, names_from_disk=True) as f:
                    if path not in positions and tail is not None:
                        positions[path] = tail_start(f, os.fstat(f.fileno()).st_size, tail)
                    f.seek(positions.get(path, 0))

                    def chunks(f=f) -> Iterator[bytes]:
                        while chunk := f.read(LINE_CHUNK):
                            yield chunk
                    for offset, _, line in offset_lines(chunks(), positions.get(path, 0)):
                        yield f"{name}: {time_text(times[path].at(offset))} {line}" if timestamps else \
                            f"{name}: {line}"
                    positions[path] = f.tell()
            except (OSError, ValueError) as e:
                yield f"{name}: (not read: {e})"
                positions[path] = 1 << 62
        if not follow or done.exists():
            return
        time.sleep(1.0)
