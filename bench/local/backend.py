"""The local backend of the lifecycle: the stack's experiments on this machine (``bench run --local``).

Each experiment runs as its cluster Job would: one launcher + torchrun agent per "node",
rendezvous through a throwaway loopback etcd (``etcd-v2``; c10d when no etcd binary is on
PATH), the same training script and the same results layout, under
``./results/<stack>/<run-id>/<experiment>/``. Phases: provision = stand-in data + etcd;
watch = start the nodes (all at once, or one experiment after another) and print progress;
teardown = SIGTERM every launcher still running (it forwards to torchrun and writes its
summary), SIGKILL after 30 s, stop etcd; collect = the rows of the results table, and a ``not run`` summary for
each experiment the run stopped before it started. A signal the user sent is passed on in the stop file
(``summary_fields.stop_text``), so the launchers record the user's Ctrl-C, not the SIGTERM they got.
Observing (``bench status``, ``bench logs``): ``status`` lists the stack's runs under the results
root with each experiment's status, ``logs`` reads (or follows) an experiment's node logs.

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
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from bench import progress
from bench.lifecycle import BackendError, Control
from bench.local.run_reservation import flags_file, record
from bench.proc import die_with_parent
from bench.results.node_logs import LineTimes, node_filter, offset_lines, tail_start, time_text
from bench.results.overview import no_experiment, run_figures, status_row
from bench.results.readers import MAX_JSON_BYTES
from bench.results.safe_paths import LINE_CHUNK, open_under, read_under
from bench.terminal import show
from core.catalog.workload_facts import WORKLOADS
from core.contract import summary_fields as F
from core.contract.names import (
    ENV_GIT_COMMIT,
    ENV_IMAGE,
    EVAL_FILE,
    LOCAL_RESULTS_ROOT,
    LOG_TIMES_SUFFIX,
    SUMMARY_FILE,
    node_log,
    node_name,
    repeat_suffix,
)
from core.contract.results_location import (
    ResultsLocation,
    log_name,
    repeat_folder,
    repeat_number,
)
from program.stack_files import PROJECT, ROOT
from workloads.train.harness.exit_paths import write_summary
from workloads.train.harness.collect import read_flags
from workloads.train.harness.what_ran import LOCAL_IMAGE


def child_env(cpus: int, processes: int, tmpdir: Path | None = None) -> dict[str, str]:
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
        self.rdzv_id = f"{stack}-{run_id}-{exp.name}" + (repeat_suffix(exp.repeat) if exp.repeat else "")
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
        from core.catalog.workload_facts import WORKLOADS
        from workloads.train.common.metrics import last_step, metrics_dir, rank_files

        took = f"{time.monotonic() - self.t0:5.1f}s"
        if WORKLOADS[self.exp.workload].collective:  # no steps: one line per message size measured
            from core.contract.names import ALLREDUCE_LINES_FILE as LINES_FILE
            from workloads.train.pytorch.allreduce import message_sizes

            try:
                done = (metrics_dir(self.exp.results_dir) / LINES_FILE).read_bytes().count(b"\n")
            except OSError:
                done = 0
            return f"[{self.exp.name}] message size {done}/{len(message_sizes(self.exp.train.max_bytes))}  {took}"
        steps = max((last_step(p) for p in rank_files(self.exp.results_dir).values()), default=0)
        return f"[{self.exp.label}] step {steps}/{self.exp.train.steps}  {took}"

    def finish(self) -> None:
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
            self.eval = json.loads(path.read_text())
            progress.line(f"[{self.exp.label}] evaluation: test accuracy {self.eval['accuracy']:.3f} "
                          f"on {self.eval['samples']} images -> {show(path)}")
        else:
            self.eval = {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
            progress.line(f"[{self.exp.label}] evaluation FAILED: {done.stderr.strip()[-500:]}", err=True)

    def summary(self) -> dict[str, Any] | None:
        path = Path(self.exp.results_dir) / SUMMARY_FILE
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def row(self) -> dict[str, Any]:
        e = self.exp
        if not self.started:
            return not_run_row(e)
        fig = run_figures(self.summary())
        # What stopped it, as the launcher recorded it (summary_fields: succeeded, failed, diverged, interrupted,
        # deadline, timeout); where no summary says, what this run knows.
        status = fig["status"] or (F.TIMEOUT if self.timed_out else self.stopped_by) or "failed (no summary)"
        if self.timed_out or self.stopped_by:
            stopped = F.TIMEOUT if self.timed_out else self.stopped_by
            status = stopped if status in (F.FAILED, F.INTERRUPTED) else status
        if status == F.INTERRUPTED and fig["stop_reason"] in F.USER_SIGNALS.values():
            status = f"{status} ({fig['stop_reason']})"  # the signal the user sent: interrupted (Ctrl-C)
        if self.eval and "error" in self.eval:
            status = "failed (evaluation)"
        acc = self.eval.get("accuracy") if self.eval else None
        wall = self.wall if self.wall is not None else time.monotonic() - self.t0
        return {"experiment": e.label, "status": status, "shape": shape_text(e), "steps": fig["steps"],
                "total": fig["samples_per_s"], "per_process": fig["samples_per_s_per_process"],
                "busbw_peak_gbps": fig["busbw_peak_gbps"], "wall": round(wall, 1),
                "accuracy": acc, "path": show(Path(e.results_dir)),
                "joules_per_sample": fig["joules_per_sample"], "kwh": fig["kwh"]}


def shape_text(e: Any) -> str:
    """``2x1``, or ``1:2x1`` for an elastic experiment: its nodes (least:most) by processes per node."""
    return f"{e.min_nodes}:{e.max_nodes}x{e.procs_per_node}" if e.elastic else f"{e.max_nodes}x{e.procs_per_node}"


def not_run_row(e: Any) -> dict[str, Any]:
    """The results table's row of an experiment the run never started."""
    return {"experiment": e.label, "status": F.NOT_RUN, "shape": shape_text(e), "path": show(Path(e.results_dir))}


def not_run_reason(reason: str | None, signal_name: str | None) -> str:
    """Why an experiment never started, in its summary: what stopped the run first."""
    if reason == "interrupted":
        return f"{F.USER_SIGNALS.get(signal_name or '', 'an interrupt')} before it started"
    told = {"deadline": "the run's deadline came", "budget": "the run's budget was spent"}
    return f"{told.get(reason or '', 'the run stopped')} before it started"


def not_run_summary(e: Any, *, why: str, signal_name: str | None, now: float) -> dict[str, Any]:
    """summary.json of an experiment the run never started, so ``status``, the report and ``results.load`` show it
    as a row (``not run``) beside the experiments that ran."""
    from dataclasses import asdict

    return {F.EXPERIMENT: e.name, F.STATUS: F.NOT_RUN, F.STOP_REASON: why, F.EXIT_CODE: None,
            "signal": signal_name, F.STARTED_AT: None,
            "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), F.WALL_TIME_S: None,
            F.FRAMEWORK: e.framework, F.CONFIG: asdict(e.train),
            F.LAUNCH: {F.LAUNCH_NODES: e.max_nodes, F.LAUNCH_PROCS_PER_NODE: e.procs_per_node}}


class LocalBackend:
    name = "local"

    def __init__(self, *, stack: str, run_id: str = "", run_dir: Path | None = None, plan: list[Any] = (),
                 mode: str = "sequential", timeout_s: float = 0.0, progress_every: float = 30.0,
                 etcd_bin: str | None = None, cpus: int = 1, results_root: Path = Path(LOCAL_RESULTS_ROOT),
                 project: str = PROJECT, repeats: dict[str, int] | None = None):
        """A run's backend; with ``stack`` (and where results live) alone, one that only observes
        (``repeats``: each experiment's ``repeats``, for following a repeated experiment's logs to its end)."""
        self.stack, self.run_id, self.run_dir = stack, run_id, run_dir
        self.results_root, self.project, self.repeats = results_root, project, repeats or {}
        self.plan, self.mode, self.timeout_s = plan, mode, timeout_s
        self.every, self.etcd_bin, self.cpus = progress_every, etcd_bin, cpus
        self.runnable = [e for e in plan if not e.skip]
        self.etcd = None
        self.runs: list[ExperimentRun] = []
        self.signal_name: str | None = None  # the signal the user sent, once one came
        self.flags: list[str] = []  # what the run's summaries are flagged with (a CPU shared with another run)

    def provision(self, ctl: Control) -> None:
        from bench.local import plan as lr

        if any(e.train.dataset in lr.STANDIN_DATASETS for e in self.runnable):
            from workloads.train.common.cifar import write_standin

            write_standin(self.run_dir / "_data", **lr.CIFAR_STANDIN)
        if any(e.rdzv_backend == "etcd-v2" for e in self.runnable):
            from bench.local.etcd import LocalEtcd

            t = time.monotonic()
            try:
                self.etcd = LocalEtcd(self.etcd_bin, tmp_root=str(self.run_dir / "_tmp"),
                                      keep_log=self.run_dir / "etcd.log").start()
            except RuntimeError as e:
                raise BackendError(str(e)) from None
            progress.line(f"etcd {self.etcd.endpoint} (v2 API, loopback, temp data dir) started in "
                          f"{time.monotonic() - t:.1f}s")
        elif not self.etcd_bin:
            progress.line("no etcd binary on PATH: using torchrun's c10d rendezvous instead of etcd-v2")
        env = child_env(self.cpus, lr.processes_sharing_cores(self.runnable, self.mode), tmpdir=self.run_dir / "_tmp")
        env[F.RUN_FLAGS_ENV] = str(flags_file(self.run_dir))  # another local run sharing the CPU writes there
        self.runs = [ExperimentRun(e, stack=self.stack, run_id=self.run_id,
                                   etcd=self.etcd.endpoint if self.etcd else None, env=env,
                                   timeout_s=self.timeout_s) for e in self.runnable]

    def start(self, ctl: Control) -> None:
        """Nothing: ``watch`` starts each experiment when its turn comes (parallel: all at once)."""

    def watch(self, ctl: Control) -> None:
        if self.mode == "parallel":
            # Experiments side by side; an experiment's repeats one after another (a wave per repeat).
            for k in sorted({max(r.exp.repeat, 1) for r in self.runs}):
                if ctl.check():
                    return
                drive([r for r in self.runs if max(r.exp.repeat, 1) == k], self.every, ctl)
            return
        for r in self.runs:
            if ctl.check():
                return
            drive([r], self.every, ctl)

    def interrupt(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name
        for r in self.runs:
            r.stop(F.stop_text(F.INTERRUPTED, self.signal_name))

    def teardown(self, ctl: Control) -> bool:
        sent = signal.Signals(ctl.signum).name if ctl.reason == F.INTERRUPTED and ctl.signum else None
        for r in self.runs:
            r.stop(F.stop_text(F.INTERRUPTED, sent) if sent else None)
        for r in self.runs:
            r.wait_stopped(timeout=30)
        if self.etcd is not None:
            self.etcd.stop()
        self.flags = read_flags(str(flags_file(self.run_dir)))  # what another local run said of this one
        shutil.rmtree(self.run_dir / "_tmp", ignore_errors=True)
        return True

    def collect(self, ctl: Control) -> list[dict[str, Any]]:
        started = {r.exp.label: r for r in self.runs if r.started}
        never = [e for e in self.runnable if e.label not in started]
        sent = signal.Signals(ctl.signum).name if ctl.signum else None
        for e in never:
            write_summary(not_run_summary(e, why=not_run_reason(ctl.reason, sent), signal_name=sent, now=time.time()),
                          [Path(e.results_dir)])
        rows = [started[e.label].row() if e.label in started else not_run_row(e) for e in self.runnable]
        if self.flags:  # another local run trained beside this one: said again by the results, and kept
            record(self.run_dir, shared_cpu="; ".join(self.flags))
            for flag in self.flags:
                progress.line(f"warning: {flag}", err=True)
        return rows + [{"experiment": e.label, "status": "skipped"} for e in self.plan if e.skip]


    # -- observe (bench status, bench logs)
    def status(self) -> dict[str, Any]:
        """The stack's local runs: ``{"rows": [one bench.results.overview.status_row per experiment run]}``."""
        return {"rows": local_status_rows(self.results_root.resolve(), self.stack)}

    def logs(self, experiment: str, *, run_id: str | None = None, follow: bool = False, tail: int | None = None,
             node: str | None = None, timestamps: bool = False) -> Iterator[str]:
        """The experiment's node logs of ``run_id`` (default: its latest run), ``follow`` tailing them until
        its summary.json appears (its last repeat's, for ``repeats: N``); ``tail``: from each log's last
        ``tail`` lines; ``node``: one node's log (``node-1`` or ``1``); ``timestamps``: each line's time.
        FileNotFoundError (saying where it looked) when there is no such run; ValueError (naming the run's
        experiments) when the run lacks the experiment, or (naming the nodes there) a node that has none."""
        root = self.results_root.resolve()
        if run_id:
            run_dir = ResultsLocation(None, self.project, self.stack, run_id).local_dir(root)
        else:
            run_dir = latest_local_run(root, self.stack)
        if run_dir is None or not _folder(run_dir):
            where = self.results_root / self.stack
            raise FileNotFoundError(f"no run {run_id} under {where}" if run_id else f"not under {where}")
        exp_dir = run_dir / experiment
        if not _folder(exp_dir):
            raise ValueError(no_experiment(self.stack, run_dir.name, experiment, run_experiments(run_dir)))
        if not follow and not node_log_files(exp_dir):
            raise ValueError(f"run {run_dir.name} of stack {self.stack}: experiment {experiment!r} has no node logs "
                             "(it never started, or stopped before its launcher wrote one)")
        return local_logs(exp_dir, follow, repeats=self.repeats.get(experiment, 1), tail=tail, node=node,
                          timestamps=timestamps)


def local_status_rows(results_root: Path, stack: str) -> list[dict[str, Any]]:
    """One ``bench.results.overview.status_row`` per experiment of each local run of the stack (each repeat
    apart: ``<exp>/repeat_<k>/``), runs by name; a summary that cannot be read is a warning and a row."""
    from bench.results.readers import read_summary

    rows: list[dict[str, Any]] = []
    base = results_root / stack
    if not base.is_dir():
        return rows
    for run in sorted(p for p in base.iterdir() if _folder(p)):
        for exp in sorted(p for p in run.iterdir() if _folder(p) and not p.name.startswith("_")):
            repeats = sorted((k, d) for d in exp.iterdir() if _folder(d) and (k := repeat_number(d.name)))
            for k, folder in (repeats or [(None, exp)]):
                rel = f"{folder.relative_to(base).as_posix()}/{SUMMARY_FILE}"
                missing = None
                try:  # never through a link, never a pipe or a device, never more than a summary's bound
                    raw = read_under(base, rel, MAX_JSON_BYTES + 1)
                    summary = read_summary(raw, f"{folder}/{SUMMARY_FILE}") or {}
                except FileNotFoundError:
                    summary, missing = None, "running, or stopped before its launcher finished"
                except (OSError, ValueError) as e:
                    warnings.warn(f"{folder}/summary.json: {e}; ignored", stacklevel=2)
                    summary = {}
                rows.append(status_row(run=run.name, experiment=exp.name, repeat=k, summary=summary,
                                       results=str(folder), missing=missing))
    return rows


def local_runs(results_root: Path, stack: str) -> dict[str, dict[str, str]]:
    """Each local run of the stack with each experiment's status, and why it stopped when it did not succeed."""
    from bench.results.overview import by_run

    return by_run(local_status_rows(results_root, stack))


def _folder(path: Path) -> bool:
    """A real folder of the results tree: not a link (to anywhere), so a reader never leaves the tree."""
    return path.is_dir() and not path.is_symlink()


def latest_local_run(results_root: Path, stack: str) -> Path | None:
    """The stack's run folder changed last (a run adds its experiments' folders as it goes), None when none."""
    base = results_root / stack
    runs = sorted((p for p in base.iterdir() if _folder(p)), key=lambda p: p.stat().st_mtime) if _folder(base) else []
    return runs[-1] if runs else None


def run_experiments(run_dir: Path) -> list[str]:
    """The experiments a local run has: its folders, less its own (``_data``: names with "_" or "." first)."""
    return sorted(p.name for p in run_dir.iterdir() if _folder(p) and not p.name.startswith(("_", ".")))


def node_log_files(exp_dir: Path) -> list[tuple[str, Path]]:
    """The experiment's node logs, or each repeat's in order, as (path relative to ``exp_dir``, path): regular
    files only, never a link."""
    found = [*exp_dir.glob(node_log("*")), *exp_dir.glob(f"{repeat_folder('*')}/{node_log('*')}")]
    named = sorted((repeat_number(p.parent.parent.name) or 0, p) for p in found if p.is_file() and not p.is_symlink())
    return [(p.relative_to(exp_dir).as_posix(), p) for _, p in named]


def local_logs(exp_dir: Path, follow: bool, repeats: int = 1, *, tail: int | None = None,
               node: str | None = None, timestamps: bool = False) -> Iterator[str]:
    """The experiment's node logs, or each repeat's (``<exp>/repeat_<k>/logs/``) in order; ``follow`` tails
    them until the experiment's summary.json appears, or its last repeat's (``repeats`` > 1: each repeat
    writes its own, and none is written at the experiment's level). ``tail``: each log from its last
    ``tail`` lines on; ``node``: that node's log only (a ValueError, at once, when no log is that node's);
    ``timestamps``: each line after its node with the time the launcher captured it (its ``.times`` file)."""
    done = (exp_dir / repeat_folder(repeats) if repeats > 1 else exp_dir) / SUMMARY_FILE

    def logs() -> list[tuple[str, Path]]:
        return node_log_files(exp_dir)

    keep = node_filter([log_name(rel) or p.stem for rel, p in logs()], node, exp_dir.name) if node else None
    return _local_lines(exp_dir, logs, done, follow, tail, keep, timestamps)


def _file_chunks(root: Path, rel: str) -> Callable[[int], Iterator[bytes] | None]:
    """``LineTimes``'s reader of ``rel`` under ``root``: its bytes from a position on (None: no such file)."""
    def open_at(pos: int) -> Iterator[bytes] | None:
        if not (root / rel).is_file():
            return None

        def chunks() -> Iterator[bytes]:
            try:  # never through a link or from a pipe
                with open_under(root, rel, os.O_RDONLY, names_from_disk=True) as f:
                    f.seek(pos)
                    while chunk := f.read(LINE_CHUNK):
                        yield chunk
            except (OSError, ValueError):
                return
        return chunks()
    return open_at


def _local_lines(exp_dir: Path, logs: Callable[[], list[tuple[str, Path]]], done: Path, follow: bool,
                 tail: int | None, keep: Callable[[str], bool] | None, timestamps: bool) -> Iterator[str]:
    positions: dict[Path, int] = {}
    times: dict[Path, LineTimes] = {}
    while True:
        for rel, path in logs():
            name = log_name(rel) or path.stem
            if keep is not None and not keep(name):
                continue
            if timestamps and path not in times:
                times[path] = LineTimes(_file_chunks(exp_dir, rel + LOG_TIMES_SUFFIX), again=follow)
            try:  # streamed a chunk at a time, never through a link or from a pipe
                with open_under(exp_dir, rel, os.O_RDONLY, names_from_disk=True) as f:
                    if path not in positions and tail is not None:
                        positions[path] = tail_start(f, os.fstat(f.fileno()).st_size, tail)
                    f.seek(positions.get(path, 0))

                    def chunks(f=f) -> Iterator[bytes]:
                        while chunk := f.read(LINE_CHUNK):
                            yield chunk
                    for offset, _, line in offset_lines(chunks(), positions.get(path, 0)):
                        yield f"{name}: {time_text(times[path].at(offset))} {line}" if timestamps else \
                            f"{name}: {line}"
                    positions[path] = f.tell()
            except (OSError, ValueError) as e:
                yield f"{name}: (not read: {e})"
                positions[path] = 1 << 62
        if not follow or done.exists():
            return
        time.sleep(1.0)
