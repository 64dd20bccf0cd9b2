"""Benchmark results as pandas DataFrames: ``load`` (one row per experiment run) and ``steps``.

    from bench import results
    df = results.load("results/dev")                 # a stack, a run or one experiment
    df = results.load("s3://bucket/dev/run-001")     # the same from the results bucket
    curves = results.steps("results/dev")            # per-rank, per-step lines

A source is read at any level: the experiment folders are found by their ``summary.json``
(or, for a run that died before writing one, by its ``metrics/`` or ``logs/``), and
stack/run_id/experiment are the last three names of ``<source>/<relative path>``. Files
that are missing or malformed give a ``warnings.warn`` naming them, never a traceback; a
failed run is a row with its status and root cause. The reading (local or S3) is in
``bench.result_files``; turning documents into rows is pure (``row``, ``step_rows``).
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any, Callable, Mapping

from bench.result_files import ExperimentFiles, find_experiments
from workloads.train.summary import quantile

COLUMNS = ("stack", "run_id", "experiment", "workload", "framework", "status", "instance_type", "gpu", "nodes",
           "gpus_per_node", "world_size", "batch_size", "precision", "samples_per_s", "samples_per_s_per_gpu",
           "step_time_p50_s", "step_time_p95_s", "mfu", "wall_s", "cost_usd", "accuracy", "time_to_accuracy_s",
           "restarts", "results_uri", "error")
EXTRA = ("hourly_usd", "usd_per_1k_samples", "tflops_per_s", "flops_per_sample", "loop_seconds", "data_wait_s",
         "started_at", "image", "git_commit", "device", "config", "command")
STEP_COLUMNS = ("stack", "run_id", "experiment", "rank", "step", "loss", "step_time_s", "samples_per_s", "warmup",
                "restart", "world_size", "wall_time")
LOCAL_IMAGE = "local (no container)"
NO_SUMMARY = "no summary.json: the launcher did not finish (killed, evicted or timed out)"


def instance_price(instance_type: str | None) -> float | None:
    """On-demand USD/hour of one instance from the catalog, None where unknown."""
    if not instance_type:
        return None
    from spec import aws_catalog as catalog
    t = catalog.INSTANCE_TYPES.get(instance_type)
    return t.usd_per_hour if t and t.usd_per_hour else None


# ---- pure: documents -> rows ------------------------------------------------------------

def _flag(command: list[str], name: str) -> str | None:
    for i, arg in enumerate(command):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(command):
            return command[i + 1]
    return None


def _int(value: Any) -> int | None:
    try:
        return int(str(value).rsplit(":", 1)[-1])  # "1:2" (elastic) -> 2, the most it ran at
    except (TypeError, ValueError):
        return None


def steady_step_times(by_rank: Mapping[int, list[dict[str, Any]]]) -> list[float]:
    """Each steady (non-warm-up) step's time: the slowest rank's, as a synchronous step ends with it."""
    slowest: dict[tuple[int, int], float] = {}
    for lines in by_rank.values():
        for r in lines:
            if not r.get("warmup") and isinstance(r.get("step_time_s"), (int, float)):
                key = (r.get("restart", 0), r.get("step", 0))
                slowest[key] = max(slowest.get(key, 0.0), r["step_time_s"])
    return [slowest[k] for k in sorted(slowest)]


def _gpu(summary: Mapping[str, Any], device: Mapping[str, Any]) -> str | None:
    if device.get("name"):
        return device["name"]
    return "cpu" if summary.get("image") == LOCAL_IMAGE else None


def row(summary: Mapping[str, Any] | None, *, ids: tuple[str | None, str | None, str | None],
        by_rank: Mapping[int, list[dict[str, Any]]] | None = None, eval_doc: Mapping[str, Any] | None = None,
        log_error: str | None = None, location: str | None = None,
        price: Callable[[str | None], float | None] = instance_price) -> dict[str, Any]:
    """One experiment run as a flat row. ``summary`` None means it was missing or unreadable."""
    by_rank = by_rank or {}
    s = dict(summary or {})
    cfg = s.get("config") or {}
    tp = s.get("throughput") or {}
    acc = s.get("accuracy") or {}
    device = s.get("device") or {}
    command = s.get("command") or []
    stack, run_id, experiment = ids
    times = steady_step_times(by_rank)
    world_sizes = s.get("world_sizes") or sorted({r["world_size"] for v in by_rank.values() for r in v
                                                   if isinstance(r.get("world_size"), int)})
    gpus_per_node = s.get("gpus_per_node") or _int(_flag(command, "--nproc-per-node")) or cfg.get("gpus_per_node")
    nodes = s.get("nodes") or _int(_flag(command, "--nnodes")) or cfg.get("nodes")
    world_size = max(world_sizes) if world_sizes else (nodes * gpus_per_node if nodes and gpus_per_node else None)
    gpu = _gpu(s, device)
    instance_type = s.get("instance_type")
    hourly = price(instance_type) if gpu != "cpu" else None
    hourly = hourly * (nodes or 1) if hourly else None
    wall = s.get("wall_time_s")
    rate = tp.get("samples_per_s_total")
    status = s.get("status") or "failed"
    error = s.get("error") or log_error
    if status != "succeeded" and not error:
        error = NO_SUMMARY if summary is None else f"exit code {s.get('exit_code')}, no exception in the log tail"
    ev_acc = (eval_doc or {}).get("accuracy")
    return {
        "stack": stack, "run_id": run_id, "experiment": experiment or s.get("experiment"),
        "workload": cfg.get("workload"), "framework": s.get("framework") or "pytorch", "status": status,
        "instance_type": instance_type, "gpu": gpu, "nodes": nodes, "gpus_per_node": gpus_per_node,
        "world_size": world_size, "batch_size": cfg.get("batch_size"), "precision": cfg.get("precision"),
        "samples_per_s": rate, "samples_per_s_per_gpu": tp.get("samples_per_s_per_process"),
        "step_time_p50_s": tp.get("step_time_p50_s") or quantile(times, 0.5),
        "step_time_p95_s": tp.get("step_time_p95_s") or quantile(times, 0.95),
        "mfu": s.get("mfu") if gpu not in (None, "cpu") else None,
        "wall_s": wall, "cost_usd": round(hourly * wall / 3600, 4) if hourly and wall else None,
        "accuracy": ev_acc if ev_acc is not None else acc.get("best_accuracy"),
        "time_to_accuracy_s": acc.get("time_to_accuracy_s"),
        "restarts": s.get("restarts", max((r.get("restart", 0) for v in by_rank.values() for r in v), default=0)),
        "results_uri": s.get("results_uri") or location, "error": error,
        "hourly_usd": hourly,
        "usd_per_1k_samples": round(hourly / 3.6 / rate, 6) if hourly and rate else None,
        "tflops_per_s": s.get("tflops_per_s"), "flops_per_sample": s.get("flops_per_sample"),
        "loop_seconds": s.get("loop_seconds"), "data_wait_s": s.get("data_wait_s"),
        "started_at": s.get("started_at"), "image": s.get("image"), "git_commit": s.get("git_commit"),
        "device": device or None, "config": cfg or None, "command": command or None,
    }


def step_rows(by_rank: Mapping[int, list[dict[str, Any]]], ids: tuple[str | None, ...]) -> list[dict[str, Any]]:
    stack, run_id, experiment = ids
    return [{"stack": stack, "run_id": run_id, "experiment": experiment, "rank": rank,
             **{k: r.get(k) for k in STEP_COLUMNS[4:]}}
            for rank, lines in sorted(by_rank.items()) for r in lines]


def parse_jsonl(text: str, name: str) -> list[dict[str, Any]]:
    """The JSON object lines of ``text``; a bad line warns once (a half-written last line is normal)."""
    out, bad = [], 0
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            out.append(doc)
        elif i < len(lines) - 1 or len(lines) == 1:
            bad += 1
    if bad:
        warnings.warn(f"{name}: skipped {bad} malformed line(s)", stacklevel=3)
    return out


def parse_json(text: str | None, name: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError as e:
        warnings.warn(f"{name}: not valid JSON ({e}); ignored", stacklevel=3)
        return None
    if not isinstance(doc, dict):
        warnings.warn(f"{name}: expected a JSON object, found {type(doc).__name__}; ignored", stacklevel=3)
        return None
    return doc


# ---- I/O edges ----------------------------------------------------------------------------

RANK_FILE = re.compile(r"metrics/rank-(\d+)\.jsonl")


def _rank_lines(exp: ExperimentFiles) -> dict[int, list[dict[str, Any]]]:
    out = {}
    for rel in exp.files:
        m = RANK_FILE.fullmatch(rel)
        if m:
            out[int(m.group(1))] = parse_jsonl(exp.read_text(rel) or "", exp.name(rel))
    return dict(sorted(out.items()))


def _log_error(exp: ExperimentFiles) -> str | None:
    from workloads.train.launch import root_cause

    for rel in sorted(f for f in exp.files if f.startswith("logs/") and f.endswith(".log")):
        cause = root_cause((exp.read_text(rel) or "").splitlines()[-200:])
        if cause:
            return cause
    return None


def _experiments(sources: tuple[str, ...]) -> list[ExperimentFiles]:
    found = []
    for source in sources:
        exps = find_experiments(str(source))
        if exps == []:
            warnings.warn(f"{source}: no experiment results found (no summary.json, metrics/ or logs/)", stacklevel=3)
        found += exps or []
    return found


def load(*sources: str) -> "pandas.DataFrame":  # noqa: F821
    """One row per experiment run found under the sources (see the module docstring)."""
    import pandas as pd

    rows = []
    for exp in _experiments(sources):
        text = exp.read_text("summary.json")
        summary = parse_json(text, exp.name("summary.json"))
        by_rank = _rank_lines(exp)
        failed = summary is None or summary.get("status") != "succeeded"
        rows.append(row(summary, ids=exp.ids, by_rank=by_rank,
                        eval_doc=parse_json(exp.read_text("eval/eval.json"), exp.name("eval/eval.json")),
                        log_error=_log_error(exp) if failed and not (summary or {}).get("error") else None,
                        location=exp.location))
    df = pd.DataFrame(rows, columns=list(COLUMNS + EXTRA))
    return df.sort_values(["stack", "run_id", "experiment"], kind="stable", ignore_index=True)


def steps(*sources: str) -> "pandas.DataFrame":  # noqa: F821
    """Per-rank, per-step metrics lines (for loss and step-time curves)."""
    import pandas as pd

    rows = [r for exp in _experiments(sources) for r in step_rows(_rank_lines(exp), exp.ids)]
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS))
