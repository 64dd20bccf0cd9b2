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
One experiment's processes are a ``bench.local.experiment_run.ExperimentRun``; its row and the ``not run``
summary come from ``bench.local.result_rows``. Observing (``bench status``, ``bench logs``):
``bench.local.observe.LocalObservation``.

Nothing outlives ``bench``: etcd and the launchers get a parent-death signal
(``bench.proc.die_with_parent``), and TMPDIR points under the run's folder (``_tmp``,
removed at teardown), which is where torchrun's ``torchelastic_*`` log folders go.
torch is never imported here (the children import it).
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path
from typing import Any

from bench import progress
from bench.lifecycle import BackendError, Control
from bench.local.experiment_run import ExperimentRun, child_env, drive
from bench.local.observe import LocalObservation
from bench.local.result_rows import not_run_reason, not_run_row, not_run_summary
from bench.local.run_reservation import flags_file, record
from core.contract import summary_fields as F
from core.contract.names import LOCAL_RESULTS_ROOT
from program.stack_files import PROJECT
from workloads.train.harness.exit_paths import write_summary
from workloads.train.harness.collect import read_flags


class LocalBackend(LocalObservation):
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

    # -- provision
    def provision(self, ctl: Control) -> None:
        """The stand-in data and etcd the experiments need, then one ``ExperimentRun`` each (none started)."""
        self._write_standin_data()
        self._start_etcd()
        self.runs = self._experiment_runs()

    def _write_standin_data(self) -> None:
        """CIFAR-10's stand-in files under ``_data`` when an experiment trains on them; the shipped text, prepared as
        pre-tokenized shards (datasets.prepare.prepare_local), when a language model trains on it."""
        from bench.local import plan as lr

        if any(e.train.dataset in lr.STANDIN_DATASETS for e in self.runnable):
            from workloads.train.common.cifar import write_standin

            write_standin(self.run_dir / "_data", **lr.CIFAR_STANDIN)
        if any(e.train.dataset == lr.LOCAL_TEXT for e in self.runnable):
            from datetime import datetime, timezone

            from datasets.prepare import prepare_local

            prepare_local(lr.LOCAL_TEXT, self.run_dir / "_data", created_at=datetime.now(timezone.utc).isoformat())

    def _start_etcd(self) -> None:
        """A loopback etcd when an experiment meets through etcd-v2; else a line when there is no etcd binary."""
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

    def _experiment_runs(self) -> list[ExperimentRun]:
        """One ``ExperimentRun`` per runnable experiment, sharing the children's environment."""
        from bench.local import plan as lr

        env = child_env(self.cpus, lr.processes_sharing_cores(self.runnable, self.mode), tmpdir=self.run_dir / "_tmp")
        env[F.RUN_FLAGS_ENV] = str(flags_file(self.run_dir))  # another local run sharing the CPU writes there
        return [ExperimentRun(e, stack=self.stack, run_id=self.run_id, etcd=self.etcd.endpoint if self.etcd else None,
                              env=env, timeout_s=self.timeout_s) for e in self.runnable]

    # -- start
    def start(self, ctl: Control) -> None:
        """Nothing: ``watch`` starts each experiment when its turn comes (parallel: all at once)."""

    # -- watch
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

    # -- teardown
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

    # -- collect
    def collect(self, ctl: Control) -> list[dict[str, Any]]:
        """A row per experiment (a ``not run`` summary first for each one never started), then the skipped."""
        started = {r.exp.label: r for r in self.runs if r.started}
        self._write_not_run_summaries([e for e in self.runnable if e.label not in started], ctl)
        rows = [started[e.label].row() if e.label in started else not_run_row(e) for e in self.runnable]
        self._keep_flags()
        return rows + [{"experiment": e.label, "status": "skipped"} for e in self.plan if e.skip]

    @staticmethod
    def _write_not_run_summaries(never: list[Any], ctl: Control) -> None:
        """summary.json of each experiment the run never started, saying what stopped the run first."""
        sent = signal.Signals(ctl.signum).name if ctl.signum else None
        for e in never:
            write_summary(not_run_summary(e, why=not_run_reason(ctl.reason, sent), signal_name=sent, now=time.time()),
                          [Path(e.results_dir)])

    def _keep_flags(self) -> None:
        """Another local run trained beside this one: said again by the results, and kept in the run's record."""
        if self.flags:
            record(self.run_dir, shared_cpu="; ".join(self.flags))
            for flag in self.flags:
                progress.line(f"warning: {flag}", err=True)
