"""Turns the metrics lines of a run into its figures: throughput, per-rank numbers, time to accuracy.

Pure functions over already-read records (the launcher reads the files and adds status,
times and provenance). Throughput counts steady-state steps only: each line says whether it
was a warm-up step (the first ``--warmup-steps`` after every (re)start), and each step's
duration is the slowest rank's, since a synchronous step ends when its last rank ends.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping


def _rate(samples: float, seconds: float) -> float | None:
    return round(samples / seconds, 3) if seconds > 0 else None


def rank_figures(lines: list[dict[str, Any]]) -> dict[str, Any]:
    steady = [r for r in lines if not r.get("warmup")]
    samples = sum(r["samples"] for r in steady)
    seconds = sum(r["step_time_s"] for r in steady)
    return {"steps": len(lines), "steady_steps": len(steady),
            "last_step": max((r["step"] for r in lines), default=0),
            "samples_per_s": _rate(samples, seconds),
            "final_loss": lines[-1]["loss"] if lines else None}


def throughput(by_rank: Mapping[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Aggregate samples/s over steady steps: sum of samples / sum of per-step (slowest rank) time."""
    per_step_samples: dict[int, float] = defaultdict(float)
    per_step_time: dict[int, float] = defaultdict(float)
    per_step_procs: dict[int, int] = defaultdict(int)
    for lines in by_rank.values():
        for r in lines:
            if r.get("warmup"):
                continue
            s = r["step"]
            per_step_samples[s] += r["samples"]
            per_step_time[s] = max(per_step_time[s], r["step_time_s"])
            per_step_procs[s] += 1
    samples = sum(per_step_samples.values())
    seconds = sum(per_step_time.values())
    total = _rate(samples, seconds)
    procs = (sum(per_step_procs.values()) / len(per_step_procs)) if per_step_procs else 0
    return {"samples_per_s_total": total,
            "samples_per_s_per_process": round(total / procs, 3) if total and procs else None,
            "processes": round(procs, 2), "steady_steps": len(per_step_time),
            "steady_seconds": round(seconds, 3), "steady_samples": samples}


def step_coverage(by_rank: Mapping[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Which global steps have lines, and whether any is duplicated within one rank's file."""
    steps = set()
    duplicates = 0
    for lines in by_rank.values():
        seen = set()
        for r in lines:
            duplicates += r["step"] in seen
            seen.add(r["step"])
        steps |= seen
    last = max(steps, default=0)
    log_every = min((b - a for a, b in zip(sorted(steps), sorted(steps)[1:])), default=1) or 1
    missing = [s for s in range(log_every, last + 1, log_every) if s not in steps]
    return {"steps": last, "duplicate_lines": duplicates, "missing_steps": missing[:20]}


def time_to_accuracy(evals: list[dict[str, Any]], target: float | None) -> dict[str, Any]:
    best = max((e["accuracy"] for e in evals), default=None)
    out: dict[str, Any] = {"best_accuracy": best, "target_accuracy": target, "time_to_accuracy_s": None}
    if target is not None:
        hit = next((e for e in sorted(evals, key=lambda e: e["step"]) if e["accuracy"] >= target), None)
        if hit:
            out.update(time_to_accuracy_s=hit["elapsed_s"], time_to_accuracy_epoch=hit["epoch"])
    return out


def metrics_summary(by_rank: Mapping[int, list[dict[str, Any]]], evals: list[dict[str, Any]],
                    events: list[dict[str, Any]], target_accuracy: float | None) -> dict[str, Any]:
    restarts = max((r.get("restart", 0) for lines in by_rank.values() for r in lines), default=0)
    world_sizes = sorted({r.get("world_size") for lines in by_rank.values() for r in lines} - {None})
    return {"throughput": throughput(by_rank),
            "coverage": step_coverage(by_rank),
            "restarts": restarts,
            "world_sizes": world_sizes,
            "resumes": [e for e in events if e.get("event") == "resume"],
            "accuracy": time_to_accuracy(evals, target_accuracy),
            "ranks": {str(rank): rank_figures(lines) for rank, lines in by_rank.items()}}
