"""One experiment of a local run as its launcher processes: started, watched, stopped, and its result row.

``ExperimentRun`` starts one launcher per "node" (``bench.local.launch.local_processes``), each in its own
session with a parent-death signal, prints its progress, enforces its timeout, stops it (SIGTERM after writing
why in the stop file, ``summary_fields.STOP_REASON_ENV``), runs its evaluation, and gives its row of the results
table (``bench.local.result_rows``). ``drive`` runs a set of them side by side until all ended or the run stops.
``child_env`` is the environment every child gets: the project on PYTHONPATH, its share of the cores, TMPDIR
under the run's folder, the image and commit ``what_ran`` records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import progress
from bench.lifecycle import Control
from bench.local.result_rows import not_run_row, run_row
from bench.proc import die_with_parent
from bench.terminal import show
from core.catalog.workload_facts import WORKLOADS
from core.contract import summary_fields as F
from core.contract.names import (
    ENV_GIT_COMMIT,
    ENV_IMAGE,
    EVAL_FILE,
    SUMMARY_FILE,
    node_log,
    node_name,
    repeat_suffix,
)
from bench.results.readers import MAX_JSON_BYTES, MAX_LINES_BYTES
from program.stack_files import ROOT
from workloads.train.common.files import read_regular
from workloads.train.harness.what_ran import LOCAL_IMAGE


def child_env(cpus: int, processes: int, tmpdir: Path | None = None) -> dict[str, str]:
    """The environment of a local run's children: ours, with the project importable, ``processes`` sharing
    ``cpus`` cores, TMPDIR at ``tmpdir`` (made), and the image and commit the launcher records."""
    from bench.local.plan import threads_per_process

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = str(threads_per_process(cpus, processes))
    env["PYTHONUNBUFFERED"] = "1"
    if tmpdir is not None:
        tmpdir.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmpdir)
    env.setdefault(ENV_IMAGE, LOCAL_IMAGE)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    if commit:
        env.setdefault(ENV_GIT_COMMIT, commit)
    return env


def rendezvous_id(stack: str, run_id: str, exp: Any) -> str:
    """The torch rendezvous id of one experiment (one repeat) of a run: its nodes meet under it, no others."""
    return f"{stack}-{run_id}-{exp.name}" + (repeat_suffix(exp.repeat) if exp.repeat else "")


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
        self.rdzv_id = rendezvous_id(stack, run_id, exp)
        self.etcd = etcd
        # where stop() writes why before its SIGTERM: the launchers record it in summary.json (launch.STOP_REASON_ENV)
        self.stop_file = Path(env.get("TMPDIR") or exp.results_dir) / f"stop-{self.rdzv_id}"
        self.procs: list[subprocess.Popen] = []
        self.eval: dict[str, Any] | None = None
        self.timed_out = False
        self.stopped_by: str | None = None  # interrupted | deadline | budget: the run stopped it
        self.t0: float | None = None
        self.wall: float | None = None

    def start(self) -> None:
        """One launcher per node of the experiment, and a line saying how many of each role started."""
        from bench.local.launch import local_processes

        self.t0 = time.monotonic()
        Path(self.exp.results_dir).mkdir(parents=True, exist_ok=True)
        started = local_processes(self.exp, etcd=self.etcd, rdzv_id=self.rdzv_id)
        for p in started:
            # Own session (a terminal's Ctrl-C reaches bench only, which stops the nodes in order);
            # SIGTERM if bench dies: the launcher forwards it to the framework's command and writes its summary.
            self.procs.append(subprocess.Popen(list(p.argv), cwd=ROOT,
                                               env={**self.env, **p.env, F.STOP_REASON_ENV: str(self.stop_file)},
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                               start_new_session=True, preexec_fn=die_with_parent(signal.SIGTERM)))
        roles = {p.role: sum(q.role == p.role for q in started) for p in started}
        progress.line(f"[{self.exp.label}] started " + ", ".join(f"{n} {role}(s)" for role, n in roles.items()))

    @property
    def started(self) -> bool:
        return self.t0 is not None

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def enforce_timeout(self) -> None:
        if not self.timed_out and self.running() and time.monotonic() - self.t0 > self.timeout_s:
            self.timed_out = True
            progress.line(f"[{self.exp.label}] timed out after {self.timeout_s:.0f}s: stopping")
            self.stop(F.TIMEOUT)

    def stop(self, cause: str | None = None) -> None:
        """SIGTERM to every launcher still running, after writing why (``cause``, else what stopped the run)."""
        if not self.running():
            return
        cause = cause or (F.TIMEOUT if self.timed_out else self.stopped_by) or F.INTERRUPTED
        if not self.stop_file.exists():  # the first cause stands (a timeout, then the teardown's stop)
            try:
                self.stop_file.parent.mkdir(parents=True, exist_ok=True)
                self.stop_file.write_text(cause)
            except OSError:
                pass  # the launchers then record an interrupt
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
        from workloads.train.common.metrics import last_step, metrics_dir, rank_files

        took = f"{time.monotonic() - self.t0:5.1f}s"
        if WORKLOADS[self.exp.workload].collective:  # no steps: one line per message size measured
            from core.contract.names import ALLREDUCE_LINES_FILE as LINES_FILE
            from workloads.train.pytorch.allreduce import message_sizes

            try:
                done = read_regular(metrics_dir(self.exp.results_dir) / LINES_FILE, MAX_LINES_BYTES).count(b"\n")
            except OSError:
                done = 0
            return f"[{self.exp.name}] message size {done}/{len(message_sizes(self.exp.train.max_bytes))}  {took}"
        steps = max((last_step(p) for p in rank_files(self.exp.results_dir).values()), default=0)
        return f"[{self.exp.label}] step {steps}/{self.exp.train.steps}  {took}"

    def finish(self) -> None:
        """Wait for the launchers, say how the experiment ended (and where its log is), then evaluate it."""
        for p in self.procs:
            p.wait()
        self.wall = time.monotonic() - self.t0
        summary = self.summary()
        status = (summary or {}).get(F.STATUS)
        status = status if status in F.STATUSES else F.FAILED  # never a run's own text on the terminal
        ok = status == F.SUCCEEDED
        progress.line(f"[{self.exp.label}] {'succeeded' if ok else status.upper()} in {self.wall:.1f}s")
        if not ok:
            log = Path(self.exp.results_dir) / node_log(node_name(0))
            error = (summary or {}).get("error") or "no exception in the log tail"
            progress.line(f"[{self.exp.label}] {error}\n[{self.exp.label}] log: {show(log)}", err=True)
        if ok and self.exp.evaluate and WORKLOADS[self.exp.workload].evaluates:
            self._evaluate()

    def _evaluate(self) -> None:
        from bench.local.plan import evaluate_command, evaluation_dir

        # dies with bench (a kill -9 of bench during the evaluation once left it running)
        done = subprocess.run(evaluate_command(self.exp, python=sys.executable), cwd=ROOT, env=self.env,
                              capture_output=True, text=True, preexec_fn=die_with_parent(signal.SIGTERM))
        path = evaluation_dir(self.exp) / EVAL_FILE
        if done.returncode == 0 and path.is_file():
            self.eval = json.loads(read_regular(path, MAX_JSON_BYTES))
            progress.line(f"[{self.exp.label}] evaluation: test accuracy {self.eval['accuracy']:.3f} "
                          f"on {self.eval['samples']} images -> {show(path)}")
        else:
            self.eval = {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
            progress.line(f"[{self.exp.label}] evaluation FAILED: {done.stderr.strip()[-500:]}", err=True)

    def summary(self) -> dict[str, Any] | None:
        path = Path(self.exp.results_dir) / SUMMARY_FILE
        try:
            return json.loads(read_regular(path, MAX_JSON_BYTES))
        except (OSError, ValueError, RecursionError):
            return None

    def row(self) -> dict[str, Any]:
        """Its row of the results table (``bench.local.result_rows``)."""
        if not self.started:
            return not_run_row(self.exp)
        wall = self.wall if self.wall is not None else time.monotonic() - self.t0
        return run_row(self.exp, self.summary(), timed_out=self.timed_out, stopped_by=self.stopped_by,
                       evaluation=self.eval, wall=wall)
