"""``python -m bench run <stack> --local``: run the stack's experiments on this machine, scaled down.

Each experiment runs as its cluster Job would: one launcher + torchrun agent per "node",
rendezvous through a throwaway loopback etcd (``etcd-v2``; c10d when no etcd binary is on
PATH), the same training script and the same results layout, under
``./results/<stack>/<run-id>/<experiment>/``. Progress is printed every few seconds and a
results table at the end; the exit code is 1 if any experiment failed, 2 for a config error.
torch is never imported here (the children import it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.errors import USAGE_ERROR, fail
from bench.stack_files import ROOT


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a stack's experiments (--local: on this machine)", description=__doc__)
    p.add_argument("stack", help="the stack name, e.g. dev (reads Pulumi.<stack>.yaml)")
    p.add_argument("--local", action="store_true", help="run on this machine, scaled down by the stack's local:")
    p.add_argument("--experiment", metavar="NAME", help="run only this experiment")
    p.add_argument("--run-id", metavar="ID", help="results folder name (default: UTC timestamp)")
    p.add_argument("--results-root", default="results", metavar="DIR", help="default: ./results")
    p.add_argument("--progress-every", type=float, default=3.0, metavar="S", help="seconds between progress lines")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the node commands, run nothing")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from bench import local_plan as lr
    from bench.stack_files import load_stack_config
    from spec.fields import ConfigError

    if not args.local:
        return fail("only --local runs are driven from here: in the cluster the experiments run as Jobs "
                    f"created by `pulumi up` on the stack; try: python -m bench run {args.stack} --local")
    try:
        cfg = load_stack_config(args.stack)
    except ConfigError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=sys.stderr)
        return USAGE_ERROR
    run_id = args.run_id or lr.default_run_id(datetime.now(timezone.utc))
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", run_id):
        return fail(f'--run-id={run_id!r}: use letters, digits, ".", "_" or "-", e.g. "try-2"')
    names = [e.name for e in cfg.experiments]
    if args.experiment and args.experiment not in names:
        return fail(f"--experiment={args.experiment!r}: not in stack {args.stack}; experiments: "
                    f"{', '.join(names) or 'none'}")
    if not names:
        return fail(f"stack {args.stack} has no experiments (eksbench:experiments)")
    run_dir = Path(args.results_root).resolve() / args.stack / run_id
    etcd_bin = shutil.which("etcd")
    plan = [lr.with_rendezvous(e, etcd_available=bool(etcd_bin))
            for e in lr.plan_local(cfg.experiments, cfg.local, run_dir=run_dir, only=args.experiment,
                                   gpu=bool(shutil.which("nvidia-smi")))]
    cpus = os.cpu_count() or 1
    mode, why = lr.execution_mode(cfg.execution, cpus, plan)
    print(f"stack {args.stack}, run {run_id}: {len(plan)} experiment(s), {why}")
    print(f"results: {_show(run_dir)}")
    for e in plan:
        shape = f"{e.min_nodes}:{e.max_nodes}" if e.elastic else str(e.max_nodes)
        print(f"  {e.name}: {e.workload}, nodes {shape} x {e.procs_per_node} proc, {e.train.steps} steps, "
              f"batch {e.train.batch_size}, {e.train.precision}, rendezvous {e.rdzv_backend}"
              + (f" -- SKIPPED: {e.skip}" if e.skip else ""))
        for note in e.notes:
            print(f"      {note}")
    runnable = [e for e in plan if not e.skip]
    if args.dry_run:
        for e in runnable:
            for n in range(e.max_nodes):
                print(" ".join(lr.node_command(e, n, python=sys.executable, endpoint="127.0.0.1:PORT",
                                               rdzv_id=f"{args.stack}-{run_id}-{e.name}")))
        return 0
    if any(e.train.dataset in lr.STANDIN_DATASETS for e in runnable):
        from workloads.train.cifar import write_standin

        write_standin(run_dir / "_data", **lr.CIFAR_STANDIN)
    started = time.monotonic()
    etcd = None
    if any(e.rdzv_backend == "etcd-v2" for e in runnable):
        from bench.local_etcd import LocalEtcd

        etcd = LocalEtcd(etcd_bin).start()
        print(f"etcd {etcd.endpoint} (v2 API, loopback, temp data dir) started in {time.monotonic() - started:.1f}s")
    elif not etcd_bin:
        print("no etcd binary on PATH: using torchrun's c10d rendezvous instead of etcd-v2")
    env = _child_env(cpus, max((e.processes for e in runnable), default=1) if mode == "sequential"
                     else sum(e.processes for e in runnable))
    runs = [ExperimentRun(e, stack=args.stack, run_id=run_id, etcd=etcd.endpoint if etcd else None, env=env,
                          timeout_s=cfg.local.timeout_minutes * 60) for e in runnable]
    signal.signal(signal.SIGTERM, _interrupt)  # a killed `bench run` stops its nodes too
    try:
        if mode == "parallel":
            _drive(runs, args.progress_every)
        else:
            for r in runs:
                _drive([r], args.progress_every)
    except KeyboardInterrupt:
        for r in runs:
            r.stop()
        for r in runs:
            r.wait_stopped(timeout=30)
        raise
    finally:
        if etcd:
            etcd.stop()
    rows = [r.row() for r in runs] + [{"experiment": e.name, "status": "skipped"} for e in plan if e.skip]
    print()
    print(lr.results_table(rows))
    print(f"total wall time {time.monotonic() - started:.1f}s")
    return 1 if any(r["status"] not in ("succeeded", "skipped") for r in rows) else 0


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _show(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _child_env(cpus: int, processes: int) -> dict[str, str]:
    from bench.local_plan import threads_per_process

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = str(threads_per_process(cpus, processes))
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("EKSBENCH_IMAGE", "local (no container)")
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    if commit:
        env.setdefault("EKSBENCH_GIT_COMMIT", commit)
    return env


def _drive(runs: list["ExperimentRun"], every: float) -> None:
    for r in runs:
        r.start()
    next_report = time.monotonic() + every
    while any(r.running() for r in runs):
        time.sleep(0.2)
        for r in runs:
            r.enforce_timeout()
        if time.monotonic() >= next_report:
            for r in runs:
                if r.running():
                    print(r.progress_line(), flush=True)
            next_report = time.monotonic() + every
    for r in runs:
        r.finish()


class ExperimentRun:
    """The launcher processes of one experiment, its progress and its result row."""

    def __init__(self, exp: Any, *, stack: str, run_id: str, etcd: str | None, env: dict[str, str], timeout_s: float):
        self.exp, self.env, self.timeout_s = exp, env, timeout_s
        self.rdzv_id = f"{stack}-{run_id}-{exp.name}"
        self.etcd = etcd
        self.procs: list[subprocess.Popen] = []
        self.eval: dict[str, Any] | None = None
        self.timed_out = False

    def start(self) -> None:
        from bench.local_etcd import free_port
        from bench.local_plan import node_command

        endpoint = self.etcd if self.exp.rdzv_backend == "etcd-v2" else f"127.0.0.1:{free_port()}"
        self.t0 = time.monotonic()
        Path(self.exp.results_dir).mkdir(parents=True, exist_ok=True)
        for n in range(self.exp.max_nodes):
            cmd = node_command(self.exp, n, python=sys.executable, endpoint=endpoint, rdzv_id=self.rdzv_id)
            self.procs.append(subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL, start_new_session=True))
        print(f"[{self.exp.name}] started {len(self.procs)} node(s)", flush=True)

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def enforce_timeout(self) -> None:
        if not self.timed_out and self.running() and time.monotonic() - self.t0 > self.timeout_s:
            self.timed_out = True
            print(f"[{self.exp.name}] timed out after {self.timeout_s:.0f}s: stopping", flush=True)
            self.stop()

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # the launcher forwards it to torchrun, then writes its summary

    def wait_stopped(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()

    def progress_line(self) -> str:
        from workloads.train.metrics import last_step, rank_files

        steps = max((last_step(p) for p in rank_files(self.exp.results_dir).values()), default=0)
        return (f"[{self.exp.name}] step {steps}/{self.exp.train.steps}  "
                f"{time.monotonic() - self.t0:5.1f}s")

    def finish(self) -> None:
        for p in self.procs:
            p.wait()
        self.wall = time.monotonic() - self.t0
        summary = self.summary()
        ok = summary is not None and summary.get("status") == "succeeded"
        print(f"[{self.exp.name}] {'succeeded' if ok else 'FAILED'} in {self.wall:.1f}s", flush=True)
        if not ok:
            log = Path(self.exp.results_dir) / "logs" / "node-0.log"
            error = (summary or {}).get("error") or "no exception in the log tail"
            print(f"[{self.exp.name}] {error}\n[{self.exp.name}] log: {_show(log)}", file=sys.stderr)
        if ok and self.exp.evaluate and self.exp.workload == "cifar10":
            self._evaluate()

    def _evaluate(self) -> None:
        import json

        from bench.local_plan import evaluate_command, evaluation_dir

        done = subprocess.run(evaluate_command(self.exp, python=sys.executable), cwd=ROOT, env=self.env,
                              capture_output=True, text=True)
        path = evaluation_dir(self.exp) / "eval.json"
        if done.returncode == 0 and path.is_file():
            self.eval = json.loads(path.read_text())
            print(f"[{self.exp.name}] evaluation: test accuracy {self.eval['accuracy']:.3f} "
                  f"on {self.eval['samples']} images -> {_show(path)}", flush=True)
        else:
            self.eval = {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
            print(f"[{self.exp.name}] evaluation FAILED: {done.stderr.strip()[-500:]}", file=sys.stderr)

    def summary(self) -> dict[str, Any] | None:
        import json

        path = Path(self.exp.results_dir) / "summary.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def row(self) -> dict[str, Any]:
        e, s = self.exp, self.summary() or {}
        tp = s.get("throughput") or {}
        shape = f"{e.min_nodes}:{e.max_nodes}x{e.procs_per_node}" if e.elastic else f"{e.max_nodes}x{e.procs_per_node}"
        status = s.get("status", "failed (no summary)")
        if self.timed_out:
            status = "failed (timeout)"
        if self.eval and "error" in self.eval:
            status = "failed (evaluation)"
        acc = self.eval.get("accuracy") if self.eval else None
        return {"experiment": e.name, "status": status, "shape": shape,
                "steps": (s.get("coverage") or {}).get("steps"), "total": tp.get("samples_per_s_total"),
                "per_process": tp.get("samples_per_s_per_process"), "wall": round(self.wall, 1),
                "accuracy": acc, "path": _show(Path(e.results_dir))}
