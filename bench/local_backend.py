"""The local backend of the lifecycle: the stack's experiments on this machine (``bench run --local``).

Each experiment runs as its cluster Job would: one launcher + torchrun agent per "node",
rendezvous through a throwaway loopback etcd (``etcd-v2``; c10d when no etcd binary is on
PATH), the same training script and the same results layout, under
``./results/<stack>/<run-id>/<experiment>/``. Phases: provision = stand-in data + etcd;
watch = start the nodes (all at once, or one experiment after another) and print progress;
teardown = SIGTERM every launcher still running (it forwards to torchrun and writes its
summary), SIGKILL after 30 s, stop etcd; collect = the rows of the results table.

Nothing outlives ``bench``: etcd and the launchers get a parent-death signal
(``bench.proc.die_with_parent``), and TMPDIR points under the run's folder (``_tmp``,
removed at teardown), which is where torchrun's ``torchelastic_*`` log folders go.
torch is never imported here (the children import it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import progress
from bench.lifecycle import BackendError, Control
from bench.proc import die_with_parent
from bench.stack_files import ROOT
from spec.workload_facts import WORKLOADS


def show(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def child_env(cpus: int, processes: int, tmpdir: Path | None = None) -> dict[str, str]:
    from bench.local_plan import threads_per_process

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = str(threads_per_process(cpus, processes))
    env["PYTHONUNBUFFERED"] = "1"
    if tmpdir is not None:
        tmpdir.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmpdir)
    env.setdefault("EKSBENCH_IMAGE", "local (no container)")
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    if commit:
        env.setdefault("EKSBENCH_GIT_COMMIT", commit)
    return env


def drive(runs: list["ExperimentRun"], every: float, ctl: Control | None = None) -> None:
    """Start ``runs``, print progress every ``every`` s, return when all ended or ``ctl`` says stop."""
    for r in runs:
        r.start()
    next_report = time.monotonic() + every
    while any(r.running() for r in runs):
        if ctl is not None and ctl.wait(0.2):
            for r in runs:
                r.stopped_by = r.stopped_by or (ctl.reason if r.running() else None)
            return
        if ctl is None:
            time.sleep(0.2)
        for r in runs:
            r.enforce_timeout()
        if time.monotonic() >= next_report:
            for r in runs:
                if r.running():
                    progress.line(r.progress_line())
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
        self.stopped_by: str | None = None  # interrupted | deadline | budget: the run stopped it
        self.t0: float | None = None
        self.wall: float | None = None

    def start(self) -> None:
        from bench.local_etcd import free_port
        from bench.local_launch import local_processes

        endpoint = self.etcd if self.exp.rdzv_backend == "etcd-v2" else f"127.0.0.1:{free_port()}"
        self.t0 = time.monotonic()
        Path(self.exp.results_dir).mkdir(parents=True, exist_ok=True)
        for proc in local_processes(self.exp, endpoint=endpoint, rdzv_id=self.rdzv_id):
            # Own session (a terminal's Ctrl-C reaches bench only, which stops the nodes in order);
            # SIGTERM if bench dies: the launcher forwards it to torchrun and writes its summary.
            self.procs.append(subprocess.Popen(proc.argv, cwd=ROOT, env={**self.env, **proc.env},
                                               stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL, start_new_session=True,
                                               preexec_fn=die_with_parent(signal.SIGTERM)))
        progress.line(f"[{self.exp.name}] started {len(self.procs)} node(s)")

    @property
    def started(self) -> bool:
        return self.t0 is not None

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def enforce_timeout(self) -> None:
        if not self.timed_out and self.running() and time.monotonic() - self.t0 > self.timeout_s:
            self.timed_out = True
            progress.line(f"[{self.exp.name}] timed out after {self.timeout_s:.0f}s: stopping")
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
                p.wait()
        if self.started and self.wall is None:
            self.wall = time.monotonic() - self.t0

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
        progress.line(f"[{self.exp.name}] {'succeeded' if ok else 'FAILED'} in {self.wall:.1f}s")
        if not ok:
            log = Path(self.exp.results_dir) / "logs" / "node-0.log"
            error = (summary or {}).get("error") or "no exception in the log tail"
            progress.line(f"[{self.exp.name}] {error}\n[{self.exp.name}] log: {show(log)}", err=True)
        if ok and self.exp.evaluate and WORKLOADS[self.exp.workload].evaluates:
            self._evaluate()

    def _evaluate(self) -> None:
        from bench.local_plan import evaluate_command, evaluation_dir

        done = subprocess.run(evaluate_command(self.exp, python=sys.executable), cwd=ROOT, env=self.env,
                              capture_output=True, text=True)
        path = evaluation_dir(self.exp) / "eval.json"
        if done.returncode == 0 and path.is_file():
            self.eval = json.loads(path.read_text())
            progress.line(f"[{self.exp.name}] evaluation: test accuracy {self.eval['accuracy']:.3f} "
                          f"on {self.eval['samples']} images -> {show(path)}")
        else:
            self.eval = {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
            progress.line(f"[{self.exp.name}] evaluation FAILED: {done.stderr.strip()[-500:]}", err=True)

    def summary(self) -> dict[str, Any] | None:
        path = Path(self.exp.results_dir) / "summary.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def row(self) -> dict[str, Any]:
        e = self.exp
        shape = f"{e.min_nodes}:{e.max_nodes}x{e.procs_per_node}" if e.elastic else f"{e.max_nodes}x{e.procs_per_node}"
        if not self.started:
            return {"experiment": e.name, "status": "not run", "shape": shape, "path": show(Path(e.results_dir))}
        s = self.summary() or {}
        tp = s.get("throughput") or {}
        status = s.get("status", "failed (no summary)")
        if self.timed_out:
            status = "failed (timeout)"
        elif self.stopped_by == "interrupted":
            status = "interrupted"
        elif self.stopped_by:
            status = f"failed ({self.stopped_by})"
        if self.eval and "error" in self.eval:
            status = "failed (evaluation)"
        acc = self.eval.get("accuracy") if self.eval else None
        wall = self.wall if self.wall is not None else time.monotonic() - self.t0
        return {"experiment": e.name, "status": status, "shape": shape,
                "steps": (s.get("coverage") or {}).get("steps"), "total": tp.get("samples_per_s_total"),
                "per_process": tp.get("samples_per_s_per_process"), "wall": round(wall, 1),
                "accuracy": acc, "path": show(Path(e.results_dir))}


class LocalBackend:
    name = "local"

    def __init__(self, *, stack: str, run_id: str, run_dir: Path, plan: list[Any], mode: str,
                 timeout_s: float, progress_every: float, etcd_bin: str | None, cpus: int):
        self.stack, self.run_id, self.run_dir = stack, run_id, run_dir
        self.plan, self.mode, self.timeout_s = plan, mode, timeout_s
        self.every, self.etcd_bin, self.cpus = progress_every, etcd_bin, cpus
        self.runnable = [e for e in plan if not e.skip]
        self.etcd = None
        self.runs: list[ExperimentRun] = []

    def provision(self, ctl: Control) -> None:
        from bench import local_plan as lr

        if any(e.train.dataset in lr.STANDIN_DATASETS for e in self.runnable):
            from workloads.train.cifar import write_standin

            write_standin(self.run_dir / "_data", **lr.CIFAR_STANDIN)
        if any(e.rdzv_backend == "etcd-v2" for e in self.runnable):
            from bench.local_etcd import LocalEtcd

            t = time.monotonic()
            try:
                self.etcd = LocalEtcd(self.etcd_bin, tmp_root=str(self.run_dir / "_tmp")).start()
            except RuntimeError as e:
                raise BackendError(str(e)) from None
            progress.line(f"etcd {self.etcd.endpoint} (v2 API, loopback, temp data dir) started in "
                          f"{time.monotonic() - t:.1f}s")
        elif not self.etcd_bin:
            progress.line("no etcd binary on PATH: using torchrun's c10d rendezvous instead of etcd-v2")
        procs = (max((e.processes for e in self.runnable), default=1) if self.mode == "sequential"
                 else sum(e.processes for e in self.runnable))
        env = child_env(self.cpus, procs, tmpdir=self.run_dir / "_tmp")
        self.runs = [ExperimentRun(e, stack=self.stack, run_id=self.run_id,
                                   etcd=self.etcd.endpoint if self.etcd else None, env=env,
                                   timeout_s=self.timeout_s) for e in self.runnable]

    def start(self, ctl: Control) -> None:
        """Nothing: ``watch`` starts each experiment when its turn comes (parallel: all at once)."""

    def watch(self, ctl: Control) -> None:
        if self.mode == "parallel":
            drive(self.runs, self.every, ctl)
            return
        for r in self.runs:
            if ctl.check():
                return
            drive([r], self.every, ctl)

    def interrupt(self, signum: int) -> None:
        for r in self.runs:
            r.stop()

    def teardown(self, ctl: Control) -> bool:
        for r in self.runs:
            r.stop()
        for r in self.runs:
            r.wait_stopped(timeout=30)
        if self.etcd is not None:
            self.etcd.stop()
        shutil.rmtree(self.run_dir / "_tmp", ignore_errors=True)
        return True

    def collect(self, ctl: Control) -> list[dict[str, Any]]:
        return [r.row() for r in self.runs] + [{"experiment": e.name, "status": "skipped"}
                                               for e in self.plan if e.skip]
