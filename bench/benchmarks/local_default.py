"""Wall time and throughput of the product's first command, ``python -m bench run dev --local``.

``python -m bench.benchmarks.local_default [--repeats 3] [--stack dev]``

Runs the command end to end (etcd start, every experiment, the evaluation step) in a
temporary results root, ``--repeats`` times, and reports each run's wall time plus, per
experiment from its summary.json: samples/s (steady-state steps only), the time from its
launcher's start to its first training step with the phases that make it up, and the
precision and memory format it ran in. The machine line names the CPU and torch's CPU
capability (``torch.backends.cpu.get_cpu_capability()``), which decide those.

Beside it, in the same invocation, the bare loop: each experiment's model, batch, image size and
steps as the local plan scales them, in fp32, in as many processes as the run gives it (each with the
run's threads per process, started together, no all-reduce, no harness), its time the slowest
process's loop; the experiments' loops add up as the run takes them in turn. ``ratio`` is the
run's median wall time over that sum: what the product's start-up, rendezvous, harness and
evaluation cost on top of the training itself (the README command's target: 4.5 or less).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from core.contract.names import SUMMARY_FILE

ROOT = Path(__file__).resolve().parents[2]


def bare_child(workload: str, image_size: int, width: int, batch: int, steps: int) -> None:
    """One process of the bare loop: ``steps`` fp32 SGD steps of the model on one random batch; prints the loop's
    seconds (imports and the model's build not counted)."""
    import torch

    from core.catalog.workload_facts import input_size
    from workloads.train.pytorch.registry import WORKLOADS

    torch.manual_seed(0)
    side = input_size(workload, image_size)
    model = WORKLOADS[workload].model(10, width).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    ce = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(batch, 3, side, side), torch.randint(0, 10, (batch,))
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = ce(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(time.perf_counter() - t0)


def bare_loops(stack: str) -> dict[str, dict]:
    """Each experiment's bare loop (module docstring): processes, threads and the slowest process's seconds."""
    from bench.local import plan as lr
    from program.stack_files import load_stack_config
    from workloads.train.common.cpu_choice import read_cpu_facts

    cfg = load_stack_config(stack, ROOT, cluster=False)
    plan = [e for e in lr.plan_local(cfg.experiments, cfg.local, run_dir=Path(tempfile.gettempdir()),
                                     cpu=read_cpu_facts()) if not e.skip]
    cpus = os.cpu_count() or 1
    mode, _ = lr.execution_mode(cfg.execution, cpus, plan)
    threads = lr.threads_per_process(cpus, lr.processes_sharing_cores(plan, mode))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    loops = {}
    for e in plan:
        t = e.train
        argv = [sys.executable, "-m", "bench.benchmarks.local_default", "--bare-child", t.workload,
                str(t.image_size), str(t.width_per_group), str(t.batch_size), str(t.steps)]
        procs = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
                 for _ in range(e.processes)]
        seconds = [float(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        loops[e.name] = {"processes": e.processes, "threads": threads, "steps": t.steps, "batch": t.batch_size,
                         "loop_s": round(max(seconds), 3)}
        print(f"bare {e.name}: {e.processes} x {t.steps} fp32 steps, {max(seconds):.2f}s", file=sys.stderr)
    return loops


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.local_default", description=__doc__.splitlines()[0])
    p.add_argument("--stack", default="dev")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--bare-child", nargs=5, metavar=("WORKLOAD", "IMAGE_SIZE", "WIDTH", "BATCH", "STEPS"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.bare_child:
        workload, *numbers = args.bare_child
        bare_child(workload, *map(int, numbers))
        return 0
    bare = bare_loops(args.stack)
    root = Path(tempfile.mkdtemp(prefix="eksbench-local-bench-"))
    runs = []
    for i in range(args.repeats):
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "bench", "run", args.stack, "--local", "--run-id", f"b{i}",
                               "--results-root", str(root)], cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        experiments = {}
        for summary in sorted((root / args.stack / f"b{i}").glob(f"*/{SUMMARY_FILE}")):
            s = json.loads(summary.read_text())
            tp = s.get("throughput") or {}
            startup = s.get("startup") or {}
            experiments[s["experiment"]] = {"status": s["status"], "wall_s": s["wall_time_s"],
                                            "samples_per_s_total": tp.get("samples_per_s_total"),
                                            "samples_per_s_per_process": tp.get("samples_per_s_per_process"),
                                            "processes": tp.get("processes"),
                                            "time_to_first_step_s": startup.get("time_to_first_step_s"),
                                            "startup_phases_s": startup.get("phases_s"),
                                            "precision": (s.get("config") or {}).get("precision"),
                                            "memory_format": s.get("memory_format")}
        runs.append({"exit_code": done.returncode, "wall_s": round(wall, 2), "experiments": experiments})
        print(f"run {i}: exit {done.returncode}, {wall:.1f}s", file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)
    walls = [r["wall_s"] for r in runs]
    names = sorted({n for r in runs for n in r["experiments"]})
    per_exp = {n: {k: statistics.median([r["experiments"][n][k] for r in runs if n in r["experiments"]
                                         and r["experiments"][n][k] is not None] or [0])
                   for k in ("samples_per_s_total", "samples_per_s_per_process", "wall_s", "time_to_first_step_s")}
               for n in names}
    bare_s = sum(b["loop_s"] for b in bare.values())
    print(json.dumps({"benchmark": "local_default", "command": f"python -m bench run {args.stack} --local",
                      "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                      "machine": machine(),
                      "wall_s": walls, "median_wall_s": statistics.median(walls), "max_wall_s": max(walls),
                      "bare_loop_s": round(bare_s, 3), "ratio": round(statistics.median(walls) / bare_s, 2),
                      "bare_loops": bare, "median_per_experiment": per_exp, "runs": runs}))
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


def machine() -> str:
    """e.g. "2-core AMD EPYC (AVX2, no bf16 instructions), torch CPU capability AVX2"."""
    from workloads.train.common.cpu_choice import read_cpu_facts

    capability = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                                capture_output=True, text=True).stdout.strip() or "unknown"
    return f"{os.cpu_count()}-core {read_cpu_facts().describe()} ({platform.machine()}), torch CPU capability {capability}"


if __name__ == "__main__":
    raise SystemExit(main())
