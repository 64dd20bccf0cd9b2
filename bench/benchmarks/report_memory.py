"""Time and peak memory of ``bench report`` and ``results.load`` at the readers' largest input, and with many runs in
one results folder, each a fresh process.

``python -m bench.benchmarks.report_memory lines [--files 25] [--lines 200000]``: one run of one experiment whose
``--files`` rank files hold ``--lines`` metrics lines each (the defaults are the readers' limits: ``MAX_STEP_ROWS``
lines in ``MAX_LINES``-line files, each line as a trainer writes it, with 10 step times).
``python -m bench.benchmarks.report_memory runs [--runs 1000]``: that many runs in one stack folder, each one
experiment with a summary, 2 rank files of 50 lines and a timeline.
``python -m bench.benchmarks.report_memory telemetry [--shape empty|full]``: one run of one experiment whose node
telemetry files hold ``MAX_TELEMETRY_ROWS`` rows and one more (the most ``results.telemetry`` keeps): ``empty``, lines
of GPU entries ``{}`` as long as a line may be (the fewest bytes a row, so the most rows a file); ``full``, eight GPUs
a line with every field the sampler writes, one line a second.
All print wall time and peak RSS (the process's own VmHWM, ``reader_bounds.measure``) per command;
``--keep DIR`` builds the tree there and keeps it, ``--only report`` measures one command.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from bench.benchmarks.reader_bounds import measure, scratch_tree
from bench.results import readers as R
from bench.results.hardware import MAX_TELEMETRY_ROWS
from core.contract.names import METRICS_DIR, SUMMARY_FILE, TELEMETRY_DIR, TIMELINE_FILE, node_name

STEPS_PER_LINE = 10


def rank_text(rank: int, lines: int, world: int, seed: int) -> str:
    """``lines`` metrics lines of one rank as the PyTorch trainer writes them (``steps`` step times each), the first
    ten warm-up, step times around 0.1 s with noise."""
    rng = random.Random(seed * 1_000_003 + rank)
    out = []
    for i in range(1, lines + 1):
        times = [round(0.1 + 0.01 * rng.random(), 6) for _ in range(STEPS_PER_LINE)]
        took = round(sum(times), 6)
        step = i * STEPS_PER_LINE
        out.append(json.dumps({
            "step": step, "epoch": 0, "loss": round(2.0 / (1 + 0.001 * i) + 0.01 * rng.random(), 6),
            "steps": STEPS_PER_LINE, "samples": 32 * STEPS_PER_LINE, "step_time_s": took,
            "samples_per_s": round(32 * STEPS_PER_LINE / took, 3), "step_times_s": times,
            "data_wait_s": 0.001, "wall_time": 1.8e9 + 1.05 * step, "world_size": world, "rank": rank,
            "restart": 0, "warmup": i <= 10}, separators=(",", ":")))  # 200,000 lines fit MAX_LINES_BYTES
    return "\n".join(out) + "\n"


def experiment(exp: Path, name: str, ranks: int, lines: int, seed: int = 0) -> None:
    (exp / METRICS_DIR).mkdir(parents=True)
    (exp / SUMMARY_FILE).write_text(json.dumps({
        "experiment": name, "status": "succeeded", "started_at": "2026-11-28T00:00:00Z", "wall_time_s": 60.0,
        "framework": "pytorch", "nodes": 1, "gpus_per_node": ranks, "world_sizes": [ranks], "restarts": 0,
        "config": {"workload": "resnet50", "batch_size": 32, "precision": "fp32"}, "image": "local",
        "throughput": {"samples_per_s_total": 300.0 * ranks, "samples_per_s_per_process": 300.0}}))
    for r in range(ranks):
        (exp / METRICS_DIR / f"rank-{r}.jsonl").write_text(rank_text(r, lines, ranks, seed))


def build_lines(root: Path, files: int, lines: int) -> Path:
    """``root/st/r1/e``: one experiment run with ``files`` rank files of ``lines`` lines."""
    experiment(root / "st" / "r1" / "e", "e", files, lines)
    return root / "st"


def build_runs(root: Path, runs: int) -> Path:
    """``root/st/run-NNNNN/e``: ``runs`` runs of one experiment, each with a summary, 2 rank files of 50 lines and
    the run's timeline."""
    for i in range(runs):
        run = root / "st" / f"run-{i:05d}"
        experiment(run / "e", "e", 2, 50, seed=i)
        (run / TIMELINE_FILE).write_text(json.dumps({
            "stack": "st", "run_id": run.name, "started_at": "2026-11-28T00:00:00Z", "gpu_nodes": 0,
            "phases": [{"name": "local run", "start_s": 0, "end_s": 60}],
            "experiments": [{"name": "e", "pods_started_s": 1, "first_step_s": 2, "last_step_s": 59}]}))
    return root / "st"


def gpu(index: int, second: int) -> dict:
    """One GPU's entry of a telemetry line as the sampler writes it (``workloads.train.harness.telemetry``)."""
    return {"index": index, "util_pct": 90 + second % 10, "mem_used_bytes": 30 * 2**30 + second,
            "mem_total_bytes": 80 * 2**30, "power_w": 650.125, "power_limit_w": 700.0, "sm_clock_mhz": 1980,
            "mem_clock_mhz": 2619, "temperature_c": 61, "throttle": [], "pcie_tx_kbps": 1200, "pcie_rx_kbps": 900,
            "nvlink_tx_kib": 10**9 + second, "nvlink_rx_kib": 10**9 + second, "energy_j": round(650.125 * second, 3),
            "throttled_s": 0.0}


def build_telemetry(root: Path, shape: str, rows: int = MAX_TELEMETRY_ROWS + 1) -> Path:
    """``root/st/r1/e``: a summary and node telemetry files of ``rows`` rows in all, each file within the readers'
    bounds (``MAX_LINES`` lines, ``MAX_LINES_BYTES``), so none is cut before the row limit."""
    exp = root / "st" / "r1" / "e"
    (exp / TELEMETRY_DIR).mkdir(parents=True)
    (exp / SUMMARY_FILE).write_text(json.dumps({"experiment": "e", "status": "succeeded", "wall_time_s": 60.0,
                                                  "throughput": {"samples_per_s_total": 300.0}}))
    per_line = (R.MAX_LINE_BYTES - 64) // 3 if shape == "empty" else 8  # ``{},`` is 3 bytes
    lines: list[str] = []
    size, second, node = 0, 0, 0
    while rows > 0:
        n = min(per_line, rows)
        gpus = [{}] * n if shape == "empty" else [gpu(i, second) for i in range(n)]
        line = json.dumps({"t": 1.8e9 + second, "gpus": gpus}, separators=(",", ":")) + "\n"
        if size + len(line) > R.MAX_LINES_BYTES or len(lines) == R.MAX_LINES:
            (exp / TELEMETRY_DIR / f"{node_name(node)}.jsonl").write_text("".join(lines))
            lines, size, node = [], 0, node + 1
        lines.append(line)
        size, second, rows = size + len(line), second + 1, rows - n
    (exp / TELEMETRY_DIR / f"{node_name(node)}.jsonl").write_text("".join(lines))
    return root / "st"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="shape", required=True)
    most = sub.add_parser("lines", help="one run at the readers' line limits")
    most.add_argument("--files", type=int, default=R.MAX_STEP_ROWS // R.MAX_LINES)
    most.add_argument("--lines", type=int, default=R.MAX_LINES)
    many = sub.add_parser("runs", help="many runs in one stack folder")
    many.add_argument("--runs", type=int, default=1000)
    hw = sub.add_parser("telemetry", help="one run at the telemetry row limit")
    hw.add_argument("--shape", dest="entries", choices=("empty", "full"), default="empty")
    for s in (most, many, hw):
        s.add_argument("--keep", metavar="DIR", help="build the tree here and keep it")
        s.add_argument("--only", choices=("report", "results.load", "results.telemetry"),
                       help="measure this command alone")
        s.add_argument("--timeout", type=float, default=1800, help="seconds per command")
    a = p.parse_args(argv)
    with scratch_tree(a.keep, "eksbench-report-memory-") as root:
        stack = (build_lines(root, a.files, a.lines) if a.shape == "lines" else build_runs(root, a.runs)
                 if a.shape == "runs" else build_telemetry(root, a.entries))
        size = sum(f.stat().st_size for f in stack.rglob("*") if f.is_file())
        print(f"{a.shape}: {stack} ({size / 2**20:,.0f} MiB)", flush=True)
        reader = "telemetry" if a.shape == "telemetry" else "load"
        commands = (("report", ["-m", "bench", "report", str(stack), "--out", str(root / "r.html")]),
                    (f"results.{reader}", ["-c", f"from bench import results; results.{reader}({str(stack)!r})"]))
        for name, cmd in commands:
            if a.only in (None, name):
                measure(name, cmd, timeout=a.timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
