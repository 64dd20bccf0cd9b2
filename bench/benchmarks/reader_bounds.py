"""How long the readers take on large and hostile results: ``bench report``, ``bench status``, ``bench compare``
and ``results.load`` on one run of 2,000 rank files and a timeline of 8,000 phases, each a fresh process.

``python -m bench.benchmarks.reader_bounds [--ranks 2000] [--phases 8000] [--keep DIR]``: prints wall time and
peak RSS (the process's own VmHWM) per command. Before the step-time figure drew at most 32 ranks the
report of 2,000 rank files took 27.9 s and 463 MB on the 2-core build machine (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from core.contract.names import METRICS_DIR, SUMMARY_FILE, TIMELINE_FILE

ROOT = Path(__file__).resolve().parents[2]
LINE = {"loss": 1.0, "step_time_s": 0.1, "samples_per_s": 80.0, "samples": 8, "warmup": False, "restart": 0,
        "world_size": 2000, "wall_time": 1.8e9, "steps": 10, "step_times_s": [0.01] * 10}


def build(root: Path, ranks: int, phases: int) -> Path:
    """``root/st/r1/e`` with a summary and ``ranks`` metrics files of 5 lines, and a timeline of ``phases``."""
    exp = root / "st" / "r1" / "e"
    (exp / METRICS_DIR).mkdir(parents=True)
    (exp / SUMMARY_FILE).write_text(json.dumps({"experiment": "e", "status": "succeeded",
                                                  "throughput": {"samples_per_s_total": 1e5}}))
    for r in range(ranks):
        (exp / METRICS_DIR / f"rank-{r}.jsonl").write_text(
            "\n".join(json.dumps({**LINE, "step": 10 * k, "rank": r}) for k in range(1, 6)) + "\n")
    (root / "st" / "r1" / TIMELINE_FILE).write_text(json.dumps(
        {"stack": "st", "run_id": "r1", "phases": [{"name": f"p{i}", "start_s": i, "end_s": i + 0.5}
                                                   for i in range(phases)], "experiments": []}))
    return root / "st"


# Runs ``-m MODULE ...`` or ``-c CODE`` and, at exit, writes the process's own peak RSS (VmHWM of the memory map
# it got at exec). ru_maxrss would not do: it keeps the high-water mark of the forked copy of the parent from
# before the exec (1.4 GB when the parent was a full pytest run).
MEASURED = """
import atexit, runpy, sys
report, mode, *rest = sys.argv[1:]
def peak():
    with open("/proc/self/status") as f, open(report, "w") as out:
        out.write(next(x.split()[1] for x in f if x.startswith("VmHWM")))
atexit.register(peak)
if mode == "-m":
    sys.argv = rest
    runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = ["-c"]
    exec(compile(rest[0], "<string>", "exec"), {"__name__": "__main__"})
"""


def measured_run(argv: list[str], *, cwd: Path = ROOT, timeout: float = 120) -> tuple[int, str, str, float, float]:
    """(exit code, stdout, stderr, seconds, peak RSS in MB; NaN if unknown) of ``python -m ...`` / ``python -c ...``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "peak"
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", MEASURED, str(report), *argv], cwd=cwd, capture_output=True,
                              timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"})
        took = time.monotonic() - started
        rss = int(report.read_text()) / 1024 if report.exists() else float("nan")
    return (done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"), took,
            rss)


def measure(name: str, argv: list[str], *, timeout: float = 120) -> None:
    """Prints one command's exit code, wall time and peak RSS (``measured_run``), and its stderr's end if it failed."""
    code, _, err, took, rss = measured_run(argv, timeout=timeout)
    print(f"{name:13s} exit {code}  {took:7.1f} s  peak RSS {rss:6.0f} MB", flush=True)
    if code:
        print(err[-2000:], flush=True)


@contextlib.contextmanager
def scratch_tree(keep: str | None, prefix: str) -> Iterator[Path]:
    """The folder a benchmark builds its results tree in: ``keep`` (left in place), else a temporary one, removed
    whatever happens."""
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2000)
    p.add_argument("--phases", type=int, default=8000)
    p.add_argument("--keep", metavar="DIR", help="build the tree here and keep it")
    a = p.parse_args(argv)
    with scratch_tree(a.keep, "eksbench-readers-") as root:
        stack = build(root, a.ranks, a.phases)
        load = f"from bench import results; results.load({str(stack)!r})"
        for name, cmd in (("report", ["-m", "bench", "report", str(stack), "--out", str(root / "r.html")]),
                          ("compare", ["-m", "bench", "compare", str(stack / "r1"), str(stack / "r1")]),
                          ("results.load", ["-c", load])):
            measure(name, cmd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
