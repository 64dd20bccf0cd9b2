"""What the metrics + checkpoint machinery costs the training loop, measured in one process.

``python -m bench.benchmarks.harness_overhead [--steps 100 --checkpoint-every 10 --repeats 5]``

Runs the same single-process loop (``workloads.train.pytorch.trainer.Run``) alternately with the
harness (a metrics line per step, checkpoints every N steps) and without it (``--no-harness``),
after one unmeasured warm-up run, and reports the loop wall times and the ratio of their
medians (the goal is <= 1.02). Runs come in triples (bare, harness, bare again as an A/A
control) in alternating order, so slow drifts of a shared machine cancel and the control
ratio shows how much of a difference is noise.
The loop time covers all steps and in-loop checkpoints; the final checkpoint, written once
after the last step, is reported apart (``final_save_s``) and in ``overhead_ratio_with_final``.

``--sampler`` measures the launcher's hardware sampler instead (``workloads.train.harness.telemetry``): the same
loop run as a local run runs it, the launcher wrapping ``python -m workloads.train.pytorch`` in a child process,
with the sampler (``--telemetry-interval 1``) and without it (``0``), in the same paired, alternating order with its
A/A control, the trainer's loop time read from each summary.json; and the cost of one sample, timed in this process.
Without a GPU it measures the CPU path: RAPL's counters under /sys/class/powercap where they are readable, else a
stand-in tree of the same files (one package counter), and no NVML.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from core.contract.names import CHECKPOINT_FILE, METRICS_DIR


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.harness_overhead", description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="resnet50", choices=("resnet50", "cifar10"))
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--width-per-group", type=int, default=16)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--repeats", type=int, default=6)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sampler", action="store_true", help="measure the launcher's telemetry sampler instead")
    args = p.parse_args(argv)
    if args.sampler:
        from bench.benchmarks.sampler_overhead import measure_sampler

        return measure_sampler(args)

    import torch

    from core.contract.train_args import TrainArgs
    from workloads.train.pytorch.trainer import Run

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="eksbench-overhead-"))
    base = TrainArgs(workload=args.workload, batch_size=args.batch_size, precision=args.precision, steps=args.steps,
                     dataset="synthetic", data_dir=str(tmp), checkpoint_every=args.checkpoint_every,
                     image_size=args.image_size, width_per_group=args.width_per_group, warmup_steps=0)
    env = {"rank": 0, "world_size": 1, "local_rank": 0, "restart": 0}

    finals: list[float] = []

    def once(harness: bool, tag: str) -> float:
        run = Run(replace(base, harness=harness, results_dir=str(tmp / tag)), env)
        try:
            run.build()
            run.train()
        finally:
            run.close()
        if harness:
            finals.append(run.final_save_seconds)
        return run.loop_seconds

    try:
        return _measure(args, base, env, tmp, once, finals, torch)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # each run left a checkpoint of the model's size


def _measure(args, base, env, tmp, once, finals, torch) -> int:
    once(True, "warmup")
    once(False, "warmup-bare")
    # Pairs in alternating order (an even count balances first/second position), plus an A/A
    # control (bare against bare) that shows the noise floor of this machine.
    times: dict[str, list[float]] = {"bare": [], "harness": [], "control": []}
    for i in range(args.repeats):
        order = ("bare", "harness", "control") if i % 2 == 0 else ("control", "harness", "bare")
        for variant in order:
            times[variant].append(once(variant == "harness", f"{variant}-{i}"))
    pair = [h / b for h, b in zip(times["harness"], times["bare"])]
    control = [c / b for c, b in zip(times["control"], times["bare"])]
    bare, harness = statistics.median(times["bare"]), statistics.median(times["harness"])
    ckpt = tmp / "harness-0" / CHECKPOINT_FILE
    events = [json.loads(x) for x in (tmp / "harness-0" / METRICS_DIR / "events.jsonl").read_text().splitlines()]
    snaps = [e["snapshot_s"] for e in events if e.get("event") == "checkpoint"]
    writes = [e["write_s"] for e in events if e.get("event") == "checkpoint"]
    result = {"benchmark": "harness_overhead", "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
              "machine": f"{os.cpu_count()}-core CPU ({platform.processor() or platform.machine()})",
              "torch": torch.__version__, "config": vars(args),
              "loop_s_bare": [round(t, 3) for t in times["bare"]],
              "loop_s_harness": [round(t, 3) for t in times["harness"]],
              "loop_s_control": [round(t, 3) for t in times["control"]],
              "paired_ratios": [round(r, 4) for r in pair],
              "overhead_ratio_paired_median": round(statistics.median(pair), 4),
              "control_ratio_paired_median": round(statistics.median(control), 4),
              "median_bare_s": round(bare, 3), "median_harness_s": round(harness, 3),
              "overhead_ratio": round(harness / bare, 4),
              "final_save_s": round(statistics.median(finals), 3),
              "overhead_ratio_with_final": round((harness + statistics.median(finals)) / bare, 4),
              "checkpoint_mb": round(ckpt.stat().st_size / 1e6, 1), "checkpoints_per_run": len(snaps),
              "snapshot_s_median": statistics.median(snaps) if snaps else None,
              "write_s_median": statistics.median(writes) if writes else None}
    print(json.dumps(result))
    print(f"harness overhead: {result['overhead_ratio_paired_median']:.4f}x paired median "
          f"(A/A control {result['control_ratio_paired_median']:.4f}x); median loop {harness:.3f}s vs bare {bare:.3f}s, "
          f"{args.steps} steps, checkpoint every {args.checkpoint_every}, {result['checkpoint_mb']} MB each)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
