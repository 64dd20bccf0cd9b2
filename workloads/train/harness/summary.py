"""Turns the metrics lines of a run into its figures: throughput, per-rank numbers, time to accuracy.

Pure functions over already-read records (the launcher reads the files and adds status,
times and provenance). Throughput counts steady-state steps only: each line covers an
interval of steps that is either all warm-up (the first ``--warmup-steps`` after every
(re)start, compile included) or all steady, and each interval's (and each step's) duration
is the slowest rank's, since a synchronous step ends when its last rank ends.

Efficiency: ``flops_per_sample`` (counted by the trainer with FlopCounterMode), achieved
``tflops_per_s`` and ``mfu`` against ``core.catalog.peaks`` (null with ``mfu_note`` where
there is no peak: a CPU run, an unknown GPU, a precision the GPU lacks).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Mapping, Sequence

from core.catalog.peaks import SOURCES as PEAK_SOURCES
from core.catalog.peaks import peak_tflops
from core.contract import summary_fields as F
from core.contract.strict_json import nonfinite_name
from workloads.train.harness.language_model_summary import language_model_figures


def _rate(samples: float, seconds: float) -> float | None:
    return round(samples / seconds, 3) if seconds > 0 else None


def rank_figures(lines: list[dict[str, Any]]) -> dict[str, Any]:
    steady = [r for r in lines if not r.get("warmup")]
    samples = sum(r["samples"] for r in steady)
    seconds = sum(r["step_time_s"] for r in steady)
    return {"lines": len(lines), "steps": sum(int(r.get("steps", 1)) for r in lines),
            "steady_steps": sum(int(r.get("steps", 1)) for r in steady),
            "last_step": max((r["step"] for r in lines), default=0),
            "samples_per_s": _rate(samples, seconds),
            "final_loss": _finite_or_none(lines[-1].get("loss")) if lines else None}


def _finite_or_none(value: Any) -> Any:
    return None if _nonfinite(value) else value


def _nonfinite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def numerical_health(by_rank: Mapping[int, list[dict[str, Any]]], events: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the run diverged, and with amp-fp16 the loss scale and skipped steps.

    Diverged: the trainer's ``diverged`` event (it stopped at a non-finite loss), else the first metrics
    line whose loss is not finite (a line written as NaN by an older trainer or another framework, or
    null with ``nonfinite_loss``). ``amp``: rank 0's last loss scale and the steps GradScaler skipped.
    """
    event = next((e for e in events if e.get("event") == "diverged"), None)
    diverged = {"step": event.get("step"), "reason": event.get("reason")} if event else None
    if diverged is None:
        bad = sorted((r["step"], rank, r.get("nonfinite_loss") or nonfinite_name(r.get("loss")))
                     for rank, lines in by_rank.items() for r in lines
                     if isinstance(r.get("step"), int) and (r.get("nonfinite_loss") or _nonfinite(r.get("loss"))))
        if bad:
            step, rank, what = bad[0]
            diverged = {"step": step, "reason": f"non-finite loss ({what}) at step {step} (rank {rank})"}
    scaled = [r for r in by_rank.get(0, []) if "loss_scale" in r]
    amp = ({"loss_scale": scaled[-1]["loss_scale"], "skipped_steps": scaled[-1].get("skipped_steps")}
           if scaled else None)
    return {F.DIVERGENCE: diverged, F.AMP: amp}


def quantile(values: list[float], q: float) -> float | None:
    """Linear-interpolation quantile (numpy's default), None for no values."""
    return sorted_quantile(sorted(values), q)


def sorted_quantile(v: Sequence[float], q: float) -> float | None:
    """``quantile`` of values already in order: a list, or a numpy array (bench.results.rank_lines), whose items
    are taken as Python floats so both round alike."""
    if not len(v):
        return None
    pos = (len(v) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(v) - 1)
    a, b = float(v[lo]), float(v[hi])
    return round(a + (b - a) * (pos - lo), 6)


def throughput(by_rank: Mapping[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Aggregate samples/s over steady intervals: sum of samples / sum of per-interval (slowest rank)
    time; step-time percentiles over steady steps (each the slowest rank's)."""
    per_line_samples: dict[int, float] = defaultdict(float)
    per_line_time: dict[int, float] = defaultdict(float)
    per_line_procs: dict[int, int] = defaultdict(int)
    per_step_time: dict[int, float] = defaultdict(float)
    steps_in_line: dict[int, int] = {}
    for lines in by_rank.values():
        for r in lines:
            if r.get("warmup"):
                continue
            s = r["step"]
            per_line_samples[s] += r["samples"]
            per_line_time[s] = max(per_line_time[s], r["step_time_s"])
            per_line_procs[s] += 1
            times = r.get("step_times_s") or []
            steps_in_line[s] = max(steps_in_line.get(s, 0), int(r.get("steps", len(times) or 1)))
            for k, t in enumerate(times):
                step = s - len(times) + 1 + k
                per_step_time[step] = max(per_step_time[step], t)
    samples = sum(per_line_samples.values())
    seconds = sum(per_line_time.values())
    total = _rate(samples, seconds)
    procs = (sum(per_line_procs.values()) / len(per_line_procs)) if per_line_procs else 0
    step_times = list(per_step_time.values())
    return {F.SAMPLES_PER_S_TOTAL: total,
            F.SAMPLES_PER_S_PER_PROCESS: round(total / procs, 3) if total and procs else None,
            "processes": round(procs, 2), "steady_steps": sum(steps_in_line.values()),
            "steady_lines": len(per_line_time),
            "steady_seconds": round(seconds, 3), "steady_samples": samples,
            F.STEP_TIME_P50_S: quantile(step_times, 0.5), F.STEP_TIME_P95_S: quantile(step_times, 0.95),
            "step_time_mean_s": round(sum(step_times) / len(step_times), 6) if step_times else None}


def per_device(tp: dict[str, Any], info: Mapping[str, Any]) -> dict[str, Any]:
    """``tp`` with the rate per device: a process's rate over the devices it drives (the trainer's run_info
    ``devices_per_process``: a TensorFlow worker's replicas, every GPU of its node; 1 for the others)."""
    devices = info.get(F.DEVICES_PER_PROCESS)
    devices = devices if isinstance(devices, int) and not isinstance(devices, bool) and devices >= 1 else 1
    per_process = tp.get(F.SAMPLES_PER_S_PER_PROCESS)
    return {**tp, F.DEVICES_PER_PROCESS: devices,
            F.SAMPLES_PER_S_PER_DEVICE: round(per_process / devices, 3) if per_process else None}


def data_wait(by_rank: Mapping[int, list[dict[str, Any]]]) -> float | None:
    """Seconds of steady steps spent waiting on the data loader, the most-waiting rank's."""
    waits = [sum(r.get("data_wait_s") or 0.0 for r in lines if not r.get("warmup"))
             for lines in by_rank.values() if any("data_wait_s" in r for r in lines)]
    return round(max(waits), 4) if waits else None


def peak_memory(by_rank: Mapping[int, list[dict[str, Any]]]) -> float | None:
    values = [r["peak_memory_gib"] for lines in by_rank.values() for r in lines
              if isinstance(r.get("peak_memory_gib"), (int, float))]
    return max(values) if values else None


def efficiency(tp: Mapping[str, Any], info: Mapping[str, Any], precision: str | None) -> dict[str, Any]:
    """flops_per_sample, achieved tflops_per_s (all processes, and per GPU), mfu or why there is none."""
    flops = info.get("flops_per_sample")
    device = (info.get("device") or {}).get("name")
    per_proc = tp.get(F.SAMPLES_PER_S_PER_DEVICE, tp.get(F.SAMPLES_PER_S_PER_PROCESS))
    total = tp.get("samples_per_s_total")
    out: dict[str, Any] = {"flops_per_sample": flops, "tflops_per_s": None, "tflops_per_s_per_gpu": None,
                           "peak_tflops_per_gpu": None, "mfu": None, "mfu_note": None}
    if not flops:
        out["mfu_note"] = info.get("flops_note") or "no FLOP count for this run"
        return out
    if total:
        out["tflops_per_s"] = round(flops * total / 1e12, 6)
    per_gpu = flops * per_proc / 1e12 if per_proc else None  # per device: a GPU, or a CPU run's process
    peak, why = peak_tflops(device, precision or "fp32")
    if device and device != "cpu":
        out["tflops_per_s_per_gpu"] = round(per_gpu, 6) if per_gpu else None
    if peak is None:
        out["mfu_note"] = why
    elif per_gpu is None:
        out["mfu_note"] = "no steady-state throughput"
    else:
        out.update(peak_tflops_per_gpu=peak, mfu=round(per_gpu / peak, 6),
                   mfu_note=f"achieved model TFLOP/s per GPU / {peak} ({device}, {precision}; {PEAK_SOURCES})")
    return out


def step_coverage(by_rank: Mapping[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Which global steps the lines cover (a line covers its ``steps`` steps up to ``step``), and
    how many lines overlap steps an earlier line of the same rank already covered."""
    steps: set[int] = set()
    duplicates = 0
    for lines in by_rank.values():
        seen: set[int] = set()
        for r in lines:
            covered = set(range(r["step"] - int(r.get("steps", 1)) + 1, r["step"] + 1))
            duplicates += bool(covered & seen)
            seen |= covered
        steps |= seen
    last = max(steps, default=0)
    missing = [s for s in range(1, last + 1) if s not in steps]
    return {"steps": last, "duplicate_lines": duplicates, "missing_steps": missing[:20]}


def accuracy_hit(evals: list[dict[str, Any]], target: float | None) -> dict[str, Any] | None:
    """The first evaluation (by step) at or above ``target``; None without a target or before one reached it."""
    if target is None:
        return None
    return next((e for e in sorted(evals, key=lambda e: e["step"]) if e["accuracy"] >= target), None)


def time_to_accuracy(evals: list[dict[str, Any]], target: float | None) -> dict[str, Any]:
    best = max((e["accuracy"] for e in evals), default=None)
    out: dict[str, Any] = {F.BEST_ACCURACY: best, "target_accuracy": target, F.TIME_TO_ACCURACY_S: None}
    hit = accuracy_hit(evals, target)
    if hit:
        out.update({F.TIME_TO_ACCURACY_S: hit["elapsed_s"], "time_to_accuracy_epoch": hit["epoch"]})
    return out


def metrics_summary(by_rank: Mapping[int, list[dict[str, Any]]], evals: list[dict[str, Any]],
                    events: list[dict[str, Any]], target_accuracy: float | None,
                    precision: str | None = None) -> dict[str, Any]:
    restarts = max((r.get("restart", 0) for lines in by_rank.values() for r in lines), default=0)
    world_sizes = sorted({r.get("world_size") for lines in by_rank.values() for r in lines} - {None})
    info = next((e for e in reversed(events) if e.get("event") == "run_info"), {})
    end = next((e for e in reversed(events) if e.get("event") == "end"), {})
    startup = next((e for e in events if e.get("event") == "startup"), None)
    tp = per_device(throughput(by_rank), info)
    device = dict(info.get("device") or {})
    if device:
        device["peak_memory_gib"] = peak_memory(by_rank)
    loop = end.get("loop_seconds")
    return {F.THROUGHPUT: tp, **numerical_health(by_rank, events),
            # what the ranks trained in (a CPU's choice, workloads.train.common.cpu_choice) before what was asked
            **efficiency(tp, info, info.get("precision") or precision),
            # the last attempt's whole loop (warm-up, compile, checkpoints, evaluation) beside the steady figure
            F.LOOP_SECONDS: loop,
            "loop_samples_per_s": _rate(end["samples"], loop) if loop and end.get("samples") else None,
            F.DATA_WAIT_S: data_wait(by_rank),
            # the first attempt's start-up: launcher (torchrun, rendezvous), imports, process group, build, ...
            F.STARTUP: {k: startup[k] for k in ("phases_s", "time_to_first_step_s")} if startup else None,
            "memory_format": info.get("memory_format"), "precision": info.get("precision"),
            # a trainer that names its model (another framework's build of the workload's layers) overrides the
            # workload's own name, which the launcher's provenance gives
            **({"model": info["model"]} if info.get("model") else {}),
            F.DEVICE: device or None,
            F.NODES: info.get("nodes"), F.GPUS_PER_NODE: info.get("gpus_per_node"),
            F.SAMPLES_PER_EPOCH: info.get("samples_per_epoch"),
            F.COVERAGE: step_coverage(by_rank),
            F.RESTARTS: restarts,
            F.WORLD_SIZES: world_sizes,
            "resumes": [e for e in events if e.get("event") == "resume"],
            "lr_changes": [{k: e.get(k) for k in ("step", "world_size", "saved_world_size", "lr")}
                           for e in events if e.get("event") == "resume"],
            F.ACCURACY: time_to_accuracy([e for e in evals if "accuracy" in e], target_accuracy),
            **({F.LANGUAGE_MODEL: lm} if (lm := language_model_figures(
                tp, info, evals, by_rank, info.get("precision") or precision)) else {}),
            "ranks": {str(rank): rank_figures(lines) for rank, lines in by_rank.items()}}
