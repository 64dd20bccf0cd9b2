"""The AWS backend of the lifecycle: ``pulumi up``, watch the Jobs through S3, destroy.

provision: ``pulumi up`` through the Automation API in a worker thread, one progress line
    per resource group (an eksbench component: Network, EksCluster, ...) when it starts and when
    it is done, with the elapsed time. On SIGINT/SIGTERM (or the deadline, or the budget) the
    CLI gets ONE SIGINT and cancels gracefully; the main thread waits for ``up()`` to return.
start: nothing; the training Jobs are created by ``up`` (they do not block it: skipAwait).
watch: ``summary.json`` at each experiment's results URI is the authority (the launcher writes
    it even on failure); ``progress.json`` (``workloads.train.harness.progress``) gives step/total and
    samples/s; the Kubernetes API, when it answers, says why a pod is not running and shows a
    failing pod's last log lines. Each experiment has a deadline (its timeout_minutes, counted
    from the start of the watch; cumulative when the stack runs its experiments sequentially).
teardown: ``pulumi destroy``, retried once, then reported with the resources left and the
    command to finish it. With ``keep``: the GPU node groups are scaled to zero instead.
collect: the results prefix of each experiment copied to ./results/<stack>/<run-id>/<exp>/
    (checkpoints skipped), one row each for the results table. An experiment with ``repeats: N`` is
    watched and collected as N runs, ``<exp>/repeat_<k>/`` each (core.contract.results_location).
Each phase leaves its marks in the run's timeline (``bench.results.timeline``, ``bench.cloud.run_timeline``).
status, logs (observing a stack outside any run): ``bench.cloud.observe.CloudObservation``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench import progress
from bench.cloud import pulumi_cli, run_timeline
from bench.cloud.observe import CloudObservation
from bench.cloud.stack_operations import (
    UpProgress,
    clock_text,
    destroy_with_retry,
    last_line,
    scale_to_zero,
)
from bench.lifecycle import BackendError, Control
from bench.results import timeline as T
from core.contract.names import EVAL_DIR, EVAL_FILE, PROGRESS_FILE, SUMMARY_FILE
from core.contract.results_location import ResultsLocation, repeat_folder
from core.contract.s3_uri import parse_s3_uri


@dataclass
class Watched:
    name: str  # the experiment, or "<experiment> repeat <k>/<N>" (Experiment.label)
    uri: str
    timeout_s: float
    experiment: str = ""
    repeat: int = 0  # 1..N for one repeat of an experiment with repeats: N
    deadline: float = 0.0  # monotonic
    state: str = "waiting"  # waiting | pending | running | failing | succeeded | failed | timeout | stopped
    summary: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    reasons: list[str] = field(default_factory=list)
    fatal_since: float | None = None
    ended_at: float | None = None
    shown_log: bool = False

    @property
    def finished(self) -> bool:
        return self.state in ("succeeded", "failed", "timeout")


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
        self.kube: Any = None
        self.kube_state = "unknown"  # unknown | ok | unreachable
        self.last_summary_at: float | None = None  # monotonic: when the last summary was seen
        self.teardown_started_at: float | None = None
        self._s3: Any = None
        self.timeline = timeline or T.Recorder(stack=stack, run_id=self.cfg.run_id, gpu_nodes=0, gpu_hourly_usd=0.0)

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
        try:
            self.stk = pulumi_cli.open_stack(self.stack, self.root, check_config=False, overrides=self.ready.overrides)
        except Exception as e:  # noqa: BLE001 - CommandError from stack select/init
            raise BackendError(f"could not select or create stack {self.stack}: {last_line(e)}") from None
        self.up_progress = UpProgress([r["urn"] for r in self.ready.plan.resources])
        progress.line(f"pulumi up -s {self.stack}: about {self.ready.provision_minutes:.0f} min "
                      f"(billing from now: {self.ready.hourly_text})")
        ctl.start_billing()
        self.timeline.begin(T.UP, "pulumi up through the Automation API, start to return")
        self.up_thread = threading.Thread(target=self._up, name=f"pulumi-up-{self.stack}", daemon=True)
        self.up_thread.start()
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
        pulumi_cli.sync_stack_file(self.stack, self.root)
        run_timeline.record_up(self.timeline, self.up_progress)
        if ctl.stopping:
            return
        if self.up_error is not None:
            detail = (self.up_progress.errors[-1:] or [last_line(self.up_error)])[0]
            raise BackendError(f"pulumi up failed: {detail}")
        self.up_progress.finish()
        progress.line(f"pulumi up: done in {clock_text(time.monotonic() - self.up_progress.t0).strip()}")

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
        uris = self.outputs.get("experiment_results") or {}
        prefix = self.outputs.get("results_prefix") or ""
        cumulative = 0.0
        now = time.monotonic()
        for e in self.cfg.experiments:
            uri = uris.get(e.name) or (self.run_results.in_bucket(parse_s3_uri(prefix)[0]).child(e.name).uri
                                       if prefix else "")
            if not uri:
                raise BackendError(f"the stack has no results URI for experiment {e.name} (output experiment_results)")
            uri = uri if uri.endswith("/") else uri + "/"
            if self.cfg.execution != "sequential":
                cumulative = 0.0  # experiments start together; an experiment's repeats run in turn
            for run in e.runs():
                timeout = run.timeout_minutes * 60.0
                cumulative += timeout
                self.watched.append(Watched(name=run.label, uri=uri + (f"{repeat_folder(run.repeat)}/" if run.repeat
                                                                       else ""),
                                            timeout_s=timeout, deadline=now + cumulative, experiment=e.name,
                                            repeat=run.repeat))
        progress.line(f"{len(self.watched)} experiment(s) running as Jobs; results: {prefix or '(see outputs)'}")

    # -- watch
    def _connect_kube(self) -> None:
        from bench.cloud import kube

        try:
            access = kube.access_from_kubeconfig(self.outputs.get("kubeconfig"),
                                                 self.outputs.get("cluster_name") or "", self.cfg.region)
            self.kube = kube.KubeClient(access)
        except Exception as e:  # noqa: BLE001
            self.kube_state = "unreachable"
            progress.line(f"warning: no Kubernetes access ({type(e).__name__}: {e}); following S3 only", err=True)

    def _kube_look(self, w: Watched) -> None:
        from bench.cloud import kube

        if self.kube is None or self.kube_state == "unreachable":
            return
        try:
            pods = self.kube.pods(self.cfg.namespace, kube.experiment_selector(w.experiment or w.name, self.cfg.run_id,
                                                                               w.repeat))
            self.kube_state = "ok"
        except Exception as e:  # noqa: BLE001 - an unreachable API is a warning, never a failure
            self.kube_state = "unreachable"
            progress.line(f"warning: the Kubernetes API does not answer ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); following S3 only", err=True)
            return
        try:  # a volume that does not mount shows only in the pods' Events
            events = self.kube.events(self.cfg.namespace)
        except Exception:  # noqa: BLE001 - without them, the pods' own states still count
            events = []
        nodes = self._nodes_if_fsx()
        state, w.reasons = kube.summarize(pods, events, nodes)
        if getattr(self.kube, "clock_offset", None) is not None:  # cluster marks onto our clock (timeline)
            self.timeline.cluster_offset = self.kube.clock_offset
        self.timeline.experiment(w.name, pods_started=kube.containers_started_at(pods),
                                 source="Kubernetes API: the first container's startedAt")
        run_timeline.record_nodes_ready(self.timeline, self.kube)
        if state and not w.finished:
            w.state = state if state != "succeeded" else "running"
        if any(kube.is_fatal(r) for r in w.reasons):
            w.fatal_since = w.fatal_since or time.monotonic()
        else:
            w.fatal_since = None
        if state == "failing" and not w.shown_log:
            w.shown_log = True
            for pod in pods:
                if kube.pod_failed(pod):
                    name = pod["metadata"]["name"]
                    try:
                        tail = self.kube.log_tail(self.cfg.namespace, name, lines=15, previous=True) or \
                            self.kube.log_tail(self.cfg.namespace, name, lines=15)
                    except Exception:  # noqa: BLE001
                        tail = []
                    progress.line(f"[{w.name}] {name}: " + "; ".join(w.reasons[:3]), err=True)
                    for line in tail[-15:]:
                        progress.line(f"[{w.name}]   | {line}", err=True)
                    break

    def _nodes_if_fsx(self) -> list:
        """The cluster's nodes on an FSx stack (a node whose Lustre client failed shows only there), else []."""
        if getattr(getattr(self.cfg, "storage", None), "kind", None) != "fsx":
            return []
        try:
            return self.kube.nodes()
        except Exception:  # noqa: BLE001 - without them, the pods' own states still count
            return []

    def _line(self, w: Watched, t0: float) -> str:
        if w.summary is not None:
            s = w.summary
            tp = (s.get("throughput") or {}).get("samples_per_s_total")
            steps = (s.get("coverage") or {}).get("steps")
            return (f"[{w.name}] {w.state:<9} " + (f"{steps} steps  " if steps is not None else "")
                    + (f"{tp} samples/s  " if tp else "") + f"{s.get('wall_time_s', '-')}s in the pod")
        p = w.progress or {}
        step = f"step {p.get('step', 0)}/{p.get('total') or '?'}" if p else "step -"
        rate = f"{p['samples_per_s']:.1f} samples/s" if p.get("samples_per_s") else "- samples/s"
        why = f"  ({w.reasons[0]})" if w.reasons and not w.finished else ""
        return f"[{w.name}] {w.state:<9} {step}  {rate}  {clock_text(time.monotonic() - t0).strip()}{why}"

    def watch(self, ctl: Control) -> None:
        from bench.cloud import s3_results

        if self.outputs.get("kubeconfig"):
            self._connect_kube()
        t0 = time.monotonic()
        next_kube = t0
        next_show = t0 + self.every
        with progress.board() as board:
            while True:
                now = time.monotonic()
                look_kube = now >= next_kube
                for w in self.watched:
                    if w.finished:
                        continue
                    try:
                        w.summary = s3_results.read_json(self.s3, w.uri, SUMMARY_FILE, self.not_before)
                        if w.summary is None:
                            w.progress = s3_results.read_json(self.s3, w.uri, PROGRESS_FILE,
                                                              self.not_before) or w.progress
                    except Exception as e:  # noqa: BLE001 - S3 hiccup: try again next poll
                        progress.line(f"warning: reading {w.uri}: {type(e).__name__}: {e}", err=True)
                    if w.summary is not None:
                        self._ended(w, "succeeded" if w.summary.get("status") == "succeeded" else "failed")
                        continue
                    if look_kube:
                        self._kube_look(w)
                    if w.fatal_since is not None and now - w.fatal_since > self.fatal_after_s:
                        progress.line(f"[{w.name}] giving up: {w.reasons[0]} for "
                                      f"{(now - w.fatal_since) / 60:.0f} min", err=True)
                        self._ended(w, "failed")
                    elif now > w.deadline:
                        progress.line(f"[{w.name}] timed out after {w.timeout_s / 60:.0f} min (timeout_minutes)",
                                      err=True)
                        self._ended(w, "timeout")
                if look_kube:
                    next_kube = now + self.kube_every
                if all(w.finished for w in self.watched):
                    board.show([self._line(w, t0) for w in self.watched]) if progress.interactive() else None
                    return
                if time.monotonic() >= next_show or progress.interactive():
                    board.show([self._line(w, t0) for w in self.watched])
                    next_show = time.monotonic() + self.every
                if ctl.wait(self.poll):
                    for w in self.watched:
                        if not w.finished:
                            w.state = "stopped"
                    return

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
        from bench.cloud import s3_results
        from bench.results.overview import run_figures
        from bench.terminal import show

        rows = []
        by_name = {w.name: w for w in self.watched}
        for e in (run for x in self.cfg.experiments for run in x.runs()):
            w = by_name.get(e.label)
            dest = self.run_results.child(e.name).repeat_run(e.repeat).local_dir(self.results_root)
            shape = (f"{e.min_nodes}:{e.max_nodes}" if e.elastic else str(e.max_nodes)) + f"x{e.gpus_per_node}"
            if w is None:
                rows.append({"experiment": e.label, "status": "not run", "shape": shape})
                continue
            try:
                n = s3_results.download(self.s3, w.uri, dest)
            except Exception as ex:  # noqa: BLE001 - one experiment that cannot be copied stops no other
                progress.line(f"warning: could not copy {w.uri} to {dest}: {type(ex).__name__}: {ex}; its results "
                              "stay on S3", err=True)
                rows.append({"experiment": e.label, "status": "failed (not copied home)", "shape": shape})
                continue
            summary = _read_local_json(dest / SUMMARY_FILE) if n else None
            if self.not_before is not None and w.summary is None:
                summary = None  # a previous attempt's summary, not this run's
            fig = run_figures(summary)
            # The launcher's status (summary_fields: succeeded, failed, diverged, interrupted, deadline, timeout);
            # a pod cannot tell why it got SIGTERM, this run can: its timeout, deadline, budget or an interrupt.
            status = fig["status"] or ("interrupted" if ctl.reason == "interrupted" else "failed (no summary)")
            if w.state == "timeout" and status in ("failed", "interrupted", "failed (no summary)"):
                status = "timeout"
            elif w.state == "stopped" and status in ("failed", "interrupted", "failed (no summary)"):
                status = ctl.reason if ctl.reason in ("interrupted", "deadline") else f"stopped ({ctl.reason})"
            elif w.state == "failed" and not summary:
                status = "failed (" + (w.reasons[0].split(": ", 2)[-1] if w.reasons else "no summary") + ")"
            evaluation = _read_local_json(dest / EVAL_DIR / EVAL_FILE) or {}
            rows.append({"experiment": e.label, "status": status, "shape": shape, "steps": fig["steps"],
                         "total": fig["samples_per_s"], "per_process": fig["samples_per_s_per_process"],
                         "busbw_peak_gbps": fig["busbw_peak_gbps"], "wall": fig["wall_s"],
                         "accuracy": evaluation.get("accuracy"), "path": show(dest),
                         "joules_per_sample": fig["joules_per_sample"], "kwh": fig["kwh"]})
        if self.watched:
            progress.line(f"results copied to {show(self.run_dir)} (checkpoints stay on S3)")
        return rows


def _read_local_json(path: Path) -> dict[str, Any] | None:
    from bench.results.readers import reader_for

    try:
        return reader_for(path.name)(path.read_bytes(), str(path))
    except (OSError, ValueError):
        return None
