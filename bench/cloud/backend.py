"""The AWS backend of the lifecycle: ``pulumi up``, watch the Jobs through S3, destroy.

provision: ``pulumi up`` through the Automation API in a worker thread, one progress line
    per resource group (an eksbench component: Network, EksCluster, ...) when it starts and when
    it is done, with the elapsed time. On SIGINT/SIGTERM (or the deadline, or the budget) the
    CLI gets ONE SIGINT and cancels gracefully; the main thread waits for ``up()`` to return.
start: nothing; the training Jobs are created by ``up`` (they do not block it: skipAwait).
watch: ``summary.json`` at each experiment's results URI is the authority (the launcher writes
    it even on failure); ``progress.json`` (``workloads.train.harness.progress``) gives step/total and
    samples/s; the Kubernetes API, when it answers, says why a pod is not running and shows a
    failing pod's last log lines (``bench.cloud.pod_watch``). Each experiment has a deadline (its
    timeout_minutes, counted from the start of the watch; cumulative when the stack runs its experiments
    sequentially): each experiment run watched is a ``bench.cloud.watched.Watched``.
teardown: ``pulumi destroy``, retried once, then reported with the resources left and the
    command to finish it. With ``keep``: the GPU node groups are scaled to zero instead.
collect: the results prefix of each experiment copied to ./results/<stack>/<run-id>/<exp>/
    (checkpoints skipped), one row each for the results table (``bench.cloud.result_rows``). An experiment
    with ``repeats: N`` is watched and collected as N runs, ``<exp>/repeat_<k>/`` each
    (core.contract.results_location).
Each phase leaves its marks in the run's timeline (``bench.results.timeline``, ``bench.cloud.run_timeline``).
status, logs (observing a stack outside any run): ``bench.cloud.observe.CloudObservation``.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench import progress
from bench.cloud import capacity_blocks, pulumi_cli, run_timeline
from bench.cloud.observe import CloudObservation
from bench.cloud.pod_watch import PodWatch
from bench.cloud.result_rows import collected_row, read_local_json, shape_text
from bench.cloud.stack_operations import (
    UpProgress,
    clock_text,
    destroy_with_retry,
    last_line,
    scale_to_zero,
)
from bench.cloud.watched import Watched, watch_line, watched_runs
from bench.lifecycle import BackendError, Control
from bench.results import timeline as T
from core.contract.names import EVAL_DIR, EVAL_FILE, PROGRESS_FILE, SUMMARY_FILE
from core.contract.results_location import ResultsLocation


class CloudBackend(CloudObservation):
    name = "aws"

    def __init__(self, *, stack: str, ready: Any = None, root: Path, results_root: Path, keep: bool = False,
                 poll: float = 15.0, progress_every: float = 30.0, resume: bool = False,
                 kube_every: float = 60.0, fatal_after_s: float = 300.0, timeline: T.Recorder | None = None,
                 cfg: Any = None):
        """A run's backend (``ready``: what preflight passed); with ``cfg`` instead, one that only observes
        (``status``, ``logs``: bench/cloud/observe.py)."""
        self.stack, self.ready, self.cfg = stack, ready, ready.cfg if ready is not None else cfg
        self.root, self.results_root = root, results_root
        self.keep, self.poll, self.every = keep, poll, progress_every
        self.kube_every, self.fatal_after_s = kube_every, fatal_after_s
        self.not_before = datetime.now(timezone.utc) if resume else None
        self.stk: Any = None
        self.outputs: dict[str, Any] = {}
        self.up_thread: threading.Thread | None = None
        self.up_error: BaseException | None = None
        self.up_progress: UpProgress | None = None
        self.watched: list[Watched] = []
        self.last_summary_at: float | None = None  # monotonic: when the last summary was seen
        self.teardown_started_at: float | None = None
        self._s3: Any = None
        self.timeline = timeline or T.Recorder(stack=stack, run_id=self.cfg.run_id, gpu_nodes=0, gpu_hourly_usd=0.0)
        self.pods = PodWatch(self.cfg, self.timeline)  # what the Kubernetes API says of the pods, when it answers

    # -- helpers
    @property
    def s3(self):
        if self._s3 is None:
            from bench.cloud import s3_results

            self._s3 = s3_results.client(self.cfg.region)
        return self._s3

    @property
    def run_results(self) -> ResultsLocation:
        """This run's place in the layout (no bucket: the URIs come from the stack's outputs)."""
        return ResultsLocation(None, self.cfg.project, self.stack, self.cfg.run_id)

    @property
    def run_dir(self) -> Path:
        return self.run_results.local_dir(self.results_root)

    # -- provision
    def provision(self, ctl: Control) -> None:
        """``pulumi up`` in a worker thread, its progress said while it runs; a BackendError when it failed."""
        self._open_stack()
        progress.line(f"pulumi up -s {self.stack}: about {self.ready.provision_minutes:.0f} min "
                      f"(billing from now: {self.ready.hourly_text})")
        ctl.start_billing()
        self.timeline.begin(T.UP, "pulumi up through the Automation API, start to return")
        self.up_thread = threading.Thread(target=self._up, name=f"pulumi-up-{self.stack}", daemon=True)
        self.up_thread.start()
        self._wait_for_up(ctl)
        pulumi_cli.sync_stack_file(self.stack, self.root)
        run_timeline.record_up(self.timeline, self.up_progress)
        if ctl.stopping:
            return
        if self.up_error is not None:
            detail = (self.up_progress.errors[-1:] or [last_line(self.up_error)])[0]
            raise BackendError(f"pulumi up failed: {detail}")
        self.up_progress.finish()
        progress.line(f"pulumi up: done in {clock_text(time.monotonic() - self.up_progress.t0).strip()}")

    def _open_stack(self) -> None:
        """The stack selected (or created) with the run's overrides, and ``up``'s progress for its resources."""
        try:
            self.stk = pulumi_cli.open_stack(self.stack, self.root, check_config=False, overrides=self.ready.overrides)
        except Exception as e:  # noqa: BLE001 - CommandError from stack select/init
            raise BackendError(f"could not select or create stack {self.stack}: {last_line(e)}") from None
        self.up_progress = UpProgress([r["urn"] for r in self.ready.plan.resources])

    def _wait_for_up(self, ctl: Control) -> None:
        """Until ``up`` returns: a line of the groups in progress every ``every`` s, and one SIGINT to the CLI when
        the run stops (the deadline, the budget, an interrupt)."""
        cancelled = False
        next_note = time.monotonic() + self.every
        while self.up_thread.is_alive():
            self.up_thread.join(0.2)
            if ctl.check() and not cancelled:
                cancelled = True
                if pulumi_cli.forward_sigint():
                    progress.line("pulumi up: cancelling (SIGINT sent to the CLI; waiting for its in-flight "
                                  "operations to finish)", err=True)
            if time.monotonic() >= next_note and self.up_progress.pending():
                progress.line(f"[{clock_text(time.monotonic() - self.up_progress.t0)}] up: in progress: "
                              + ", ".join(self.up_progress.pending()))
                next_note = time.monotonic() + self.every

    def _up(self) -> None:
        try:
            # refresh: the GPU groups' sizes may have been set to zero outside Pulumi (autostop, --keep); without
            # reading them back Pulumi sees no diff and a re-run's Jobs wait on empty groups (`pulumi up --refresh`:
            # "refresh the state of the stack's resources before this update", pulumi.com/docs/cli/commands/pulumi_up/)
            result = self.stk.up(on_event=self.up_progress, suppress_progress=True, refresh=True)
            self.outputs = {k: v.value for k, v in result.outputs.items()}
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            self.up_error = e

    def interrupt(self, signum: int) -> None:
        """Cancel a running ``up`` (one SIGINT to its CLI). Never touches a running destroy."""
        if self.up_thread is not None and self.up_thread.is_alive() and self.teardown_started_at is None:
            pulumi_cli.forward_sigint()

    # -- start
    def start(self, ctl: Control) -> None:
        """The experiment runs to watch (the Jobs were created by ``up``), their deadlines counted from now."""
        self.watched = watched_runs(self.cfg, self.outputs, self.run_results, time.monotonic())
        capacity_blocks.hold(self.cfg, self.watched)  # a Capacity Block run's clock starts once its nodes are Ready
        prefix = self.outputs.get("results_prefix") or ""
        progress.line(f"{len(self.watched)} experiment(s) running as Jobs; results: {prefix or '(see outputs)'}")

    # -- watch
    def watch(self, ctl: Control) -> None:
        """Poll every experiment run until all ended or the run stops, the board shown every ``every`` s."""
        if self.outputs.get("kubeconfig"):
            self.pods.connect(self.outputs)
        t0 = time.monotonic()
        next_kube = t0
        next_show = t0 + self.every
        with progress.board() as board:
            while True:
                now = time.monotonic()
                look_kube = now >= next_kube
                for w in self.watched:
                    if not w.finished:
                        self._poll(w, now, look_kube=look_kube)
                if look_kube:
                    next_kube = now + self.kube_every
                if all(w.finished for w in self.watched):
                    board.show(self._board(t0)) if progress.interactive() else None
                    return
                if time.monotonic() >= next_show or progress.interactive():
                    board.show(self._board(t0))
                    next_show = time.monotonic() + self.every
                if ctl.wait(self.poll):
                    for w in self.watched:
                        if not w.finished:
                            w.state = "stopped"
                    return

    def _poll(self, w: Watched, now: float, *, look_kube: bool) -> None:
        """One look at an experiment run: its summary (it ended) or progress on S3, its pods when it is time,
        then the end of one whose pods cannot run or whose deadline passed."""
        from bench.cloud import s3_results

        try:
            w.summary = s3_results.read_json(self.s3, w.uri, SUMMARY_FILE, self.not_before)
            if w.summary is None:
                w.progress = s3_results.read_json(self.s3, w.uri, PROGRESS_FILE, self.not_before) or w.progress
        except Exception as e:  # noqa: BLE001 - S3 hiccup: try again next poll
            progress.line(f"warning: reading {w.uri}: {type(e).__name__}: {e}", err=True)
        if w.summary is not None:
            self._ended(w, "succeeded" if w.summary.get("status") == "succeeded" else "failed")
            return
        if look_kube:
            self.pods.look(w, at=now)
            if w.waits_for and self.pods.state == "ok":
                capacity_blocks.start_when_ready(self.watched, w, self.pods.nodes(), now, self._sequential)
        if w.fatal_since is not None and now - w.fatal_since > self.fatal_after_s:
            progress.line(f"[{w.name}] giving up: {w.reasons[0]} for {(now - w.fatal_since) / 60:.0f} min", err=True)
            self.pods.fail_jobs(w)
            self._ended(w, "failed")
        elif now > w.deadline and not (self.pods.state == "ok" and
                                       capacity_blocks.held(self.watched, w, self._sequential, now)):
            progress.line(f"[{w.name}] timed out after {w.timeout_s / 60:.0f} min (timeout_minutes)", err=True)
            self._ended(w, "timeout")

    @property
    def _sequential(self) -> bool:
        return getattr(self.cfg, "execution", "") == "sequential"

    def _board(self, t0: float) -> list[str]:
        """The progress board: a line per experiment run, ``t0`` the watch's start."""
        return [watch_line(w, time.monotonic() - t0) for w in self.watched]

    def _ended(self, w: Watched, state: str) -> None:
        w.state = state
        w.ended_at = self.last_summary_at = time.monotonic()
        s = w.summary or {}
        steps = T.steps_from_summary(w.summary)
        if steps:
            self.timeline.experiment(w.name, **steps)
        if state == "succeeded":
            tp = (s.get("throughput") or {}).get("samples_per_s_total")
            progress.line(f"[{w.name}] succeeded" + (f": {tp} samples/s" if tp else ""))
        elif w.summary is not None:
            progress.line(f"[{w.name}] FAILED: {s.get('error') or 'no exception in the log tail'}", err=True)
            for line in (s.get("log_tail") or [])[-10:]:
                progress.line(f"[{w.name}]   | {line}", err=True)

    # -- teardown
    def teardown(self, ctl: Control) -> bool:
        self.timeline.begin(T.TEARDOWN, "pulumi destroy (--keep: the GPU groups scaled to zero), start to end")
        try:
            ok = self._teardown(ctl)
        finally:
            self.timeline.end(T.TEARDOWN)
        if ok is None:  # destroyed: what did it leave behind? (exit 1 if anything)
            ok = run_timeline.audit(self.timeline, self.stack, root=self.root)
        return ok

    def _teardown(self, ctl: Control) -> bool | None:
        """False: something is left; True: nothing was created or --keep scaled down; None: destroyed."""
        self.teardown_started_at = time.monotonic()
        if self.last_summary_at is not None:
            progress.line(f"tearing down {self.teardown_started_at - self.last_summary_at:.3f}s after the last "
                          "result arrived")
        if self.stk is None:
            return True  # nothing was created
        if self.up_thread is not None and self.up_thread.is_alive():
            progress.line("waiting for pulumi up to finish cancelling before the teardown", err=True)
            self.up_thread.join()
        if self.keep:
            return scale_to_zero(self.outputs, region=self.cfg.region, stack=self.stack)
        progress.line(f"pulumi destroy -s {self.stack}" + (f" ({ctl.reason})" if ctl.reason else ""))
        events = UpProgress([], verb="destroy", out=lambda text: None)  # a line per group is enough for up
        ok, left = destroy_with_retry(self.stk, stack=self.stack, on_event=events,
                                      log=lambda m: progress.line(m, err=True))
        pulumi_cli.sync_stack_file(self.stack, self.root)
        if ok:
            progress.line(f"destroyed in {clock_text(time.monotonic() - self.teardown_started_at).strip()}; the "
                          "results bucket is kept")
            return None
        progress.line(f"error: destroy failed twice; {len(left)} resource(s) left"
                      + (": " + "; ".join(left[:15]) + (" ..." if len(left) > 15 else "") if left else "")
                      + f". They cost money until removed: eksbench destroy {self.stack} "
                      f"(or: pulumi destroy -s {self.stack} --cwd {pulumi_cli.work_dir(self.stack, self.root)})",
                      err=True)
        return False

    # -- collect
    def collect(self, ctl: Control) -> list[dict[str, Any]]:
        """Each experiment run's results copied home (checkpoints stay on S3), and its row of the results table."""
        from bench.cloud import s3_results
        from bench.terminal import show

        rows = []
        by_name = {w.name: w for w in self.watched}
        for e in (run for x in self.cfg.experiments for run in x.runs()):
            w = by_name.get(e.label)
            dest = self.run_results.child(e.name).repeat_run(e.repeat).local_dir(self.results_root)
            if w is None:
                rows.append({"experiment": e.label, "status": "not run", "shape": shape_text(e)})
                continue
            try:
                n = s3_results.download(self.s3, w.uri, dest)
            except Exception as ex:  # noqa: BLE001 - one experiment that cannot be copied stops no other
                progress.line(f"warning: could not copy {w.uri} to {dest}: {type(ex).__name__}: {ex}; its results "
                              "stay on S3", err=True)
                rows.append({"experiment": e.label, "status": "failed (not copied home)", "shape": shape_text(e)})
                continue
            summary = read_local_json(dest / SUMMARY_FILE) if n else None
            if self.not_before is not None and w.summary is None:
                summary = None  # a previous attempt's summary, not this run's
            rows.append(collected_row(e, w, dest, summary=summary, reason=ctl.reason,
                                      evaluation=read_local_json(dest / EVAL_DIR / EVAL_FILE) or {}))
        if self.watched:
            progress.line(f"results copied to {show(self.run_dir)} (checkpoints stay on S3)")
        return rows
