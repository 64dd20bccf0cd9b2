"""Per-rank metrics files: one JSON line per step, flushed as written, so a kill loses nothing.

Layout under ``<results-dir>/metrics/``: ``rank-<global_rank>.jsonl`` (training steps),
``eval.jsonl`` (test accuracy per epoch, rank 0) and ``events.jsonl`` (resumes, checkpoints).

When a worker group restarts it resumes from the last checkpoint and redoes the steps after
it; ``prune_after`` drops those lines first (rewriting each file atomically), so every step of
the run appears exactly once.  No torch here.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path
from typing import IO, Any

from core.contract import strict_json
from core.contract.names import METRICS_DIR

RANK_FILE = re.compile(r"rank-(\d+)\.jsonl$")


def metrics_dir(results_dir: str | Path) -> Path:
    return Path(results_dir) / METRICS_DIR


class JsonLines:
    """Appends JSON lines to one file and flushes each (the OS has it even if we are killed)."""

    def __init__(self, path: str | Path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = open(path, "a", encoding="utf-8", buffering=1)

    def write(self, record: dict[str, Any]) -> None:
        """One line; a non-finite top-level number is written as null with ``nonfinite_<key>`` saying which
        ("nan", "inf", "-inf"): a framework's NaN loss stays visible (workloads.train.harness.summary.numerical_health)."""
        why = {f"nonfinite_{k}": strict_json.nonfinite_name(v) for k, v in record.items()
               if strict_json.nonfinite_name(v)}
        self._file.write(strict_json.dumps({**record, **why}, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "JsonLines":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def loss_fields(loss: float) -> dict[str, Any]:
    """A metrics line's loss: rounded, or null with ``nonfinite_loss`` naming what it was (strict JSON has no NaN)."""
    if math.isfinite(loss):
        return {"loss": round(loss, 5)}
    return {"loss": None, "nonfinite_loss": strict_json.nonfinite_name(loss)}


def interval_line(*, step: int, epoch: int, loss: float, steps: int, samples_per_step: int, seconds: float,
                  step_times: list[float], data_wait: float, lr: float, world_size: int, rank: int, warmup: bool,
                  restart: int = 0, peak_memory_gib: float | None = None,
                  loss_scale: tuple[float, int] | None = None) -> dict[str, Any]:
    """The line every trainer writes for the ``steps`` steps that ended at ``step`` and took ``seconds`` (one
    shape for every framework: the harness's summary and ``bench.results`` read them alike). ``samples_per_step``:
    this rank's batch; ``step_times``: each step's own seconds; ``data_wait``: the seconds spent waiting for
    batches; ``loss_scale``: mixed precision's loss scale and the steps it skipped so far, where it scales."""
    line = {"step": step, "epoch": epoch, **loss_fields(loss), "steps": steps, "samples": samples_per_step * steps,
            "step_time_s": round(seconds, 6), "samples_per_s": round(samples_per_step * steps / seconds, 3),
            "step_times_s": [round(t, 6) for t in step_times], "data_wait_s": round(data_wait, 6),
            "peak_memory_gib": peak_memory_gib, "lr": lr, "wall_time": round(time.time(), 3),
            "world_size": world_size, "rank": rank, "restart": restart, "warmup": warmup}
    if loss_scale is not None:
        line["loss_scale"], line["skipped_steps"] = float(loss_scale[0]), int(loss_scale[1])
    return line


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """All complete lines; a half-written last line (the writer was killed mid-write) is skipped."""
    out = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def rank_files(results_dir: str | Path) -> dict[int, Path]:
    d = metrics_dir(results_dir)
    if not d.is_dir():
        return {}
    found = {}
    for p in d.iterdir():
        m = RANK_FILE.fullmatch(p.name)
        if m:
            found[int(m.group(1))] = p
    return dict(sorted(found.items()))


def read_rank_metrics(results_dir: str | Path) -> dict[int, list[dict[str, Any]]]:
    return {rank: read_jsonl(p) for rank, p in rank_files(results_dir).items()}


def last_step(path: str | Path, tail_bytes: int = 4096) -> int:
    """The step of the last complete line, reading only the file's tail (for progress display)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - tail_bytes))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0


def keep_through(records: list[dict[str, Any]], step: int) -> tuple[list[dict[str, Any]], int]:
    """The records with ``step <= step`` and how many were dropped."""
    kept = [r for r in records if int(r.get("step", 0)) <= step]
    return kept, len(records) - len(kept)


def rewrite_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(strict_json.dumps(r, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def prune_after(results_dir: str | Path, step: int) -> int:
    """Drop step lines past ``step`` from every rank file and eval.jsonl; returns lines dropped.

    Called by rank 0 of a (re)started group before any rank writes, between two barriers.
    """
    dropped = 0
    paths = list(rank_files(results_dir).values()) + [metrics_dir(results_dir) / "eval.jsonl"]
    for path in paths:
        if not path.exists():
            continue
        records = read_jsonl(path)
        kept, n = keep_through(records, step)
        if n:
            rewrite_jsonl(path, kept)
            dropped += n
    return dropped
