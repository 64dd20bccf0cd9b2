"""The AWS backend of the lifecycle: ``pulumi up``, watch the Jobs through S3, destroy.

provision: ``pulumi up`` through the Automation API in a worker thread, one progress line
    per resource group (an eksbench component: Network, EksCluster, ...) when it starts and when
    it is done, with the elapsed time. On SIGINT/SIGTERM (or the deadline, or the budget) the
    CLI gets ONE SIGINT and cancels gracefully; the main thread waits for ``up()`` to return.
start: nothing; the training Jobs are created by ``up`` (they do not block it: skipAwait).
watch: ``summary.json`` at each experiment's results URI is the authority (the launcher writes
    it even on failure); ``progress.json`` (``workloads.train.progress``) gives step/total and
    samples/s; the Kubernetes API, when it answers, says why a pod is not running and shows a
    failing pod's last log lines. Each experiment has a deadline (its timeout_minutes, counted
    from the start of the watch; cumulative when the stack runs its experiments sequentially).
teardown: ``pulumi destroy``, retried once, then reported with the resources left and the
    command to finish it. With ``keep``: the GPU node groups are scaled to zero instead.
collect: the results prefix of each experiment copied to ./results/<stack>/<run-id>/<exp>/
    (checkpoints skipped), one row each for the results table.
status, logs (observing a stack outside any run): ``bench.cloud_observe.CloudObservation``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench import progress, pulumi_cli
from bench.cloud_observe import CloudObservation
from bench.lifecycle import BackendError, Control
from bench.stack_operations import UpProgress, clock_text, destroy_with_retry, last_line
from spec.results_location import ResultsLocation
from spec.s3_uri import parse_s3_uri


@dataclass
class Watched:
    name: str
    uri: str
    timeout_s: float
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
                 kube_every: float = 60.0, fatal_after_s: float = 300.0, cfg: Any = None):
        """A run's backend (``ready``: what preflight passed); with ``cfg`` instead, one that only observes
        (``status``, ``logs``: bench/cloud_observe.py)."""
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

    # -- helpers
    @property
    def s3(self):
        if self._s3 is None:
            from bench import s3_results

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
            self.stk = pulumi_cli.open_stack(self.stack, self.root, check_config=False)
        except Exception as e:  # noqa: BLE001 - CommandError from stack select/init
            raise BackendError(f"could not select or create stack {self.stack}: {last_line(e)}") from None
        self.up_progress = UpProgress([r["urn"] for r in self.ready.plan.resources])
        progress.line(f"pulumi up -s {self.stack}: about {self.ready.provision_minutes:.0f} min "
                      f"(${self.ready.hourly_usd:.2f}/h from now)")
        ctl.start_billing()
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
        if ctl.stopping:
            return
        if self.up_error is not None:
            detail = (self.up_progress.errors[-1:] or [last_line(self.up_error)])[0]
            raise BackendError(f"pulumi up failed: {detail}")
        self.up_progress.finish()
        progress.line(f"pulumi up: done in {clock_text(time.monotonic() - self.up_progress.t0).strip()}")

    def _up(self) -> None:
        try:
            result = self.stk.up(on_event=self.up_progress, suppress_progress=True)
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
            timeout = e.timeout_minutes * 60.0
            cumulative = cumulative + timeout if self.cfg.execution == "sequential" else timeout
            uri = uris.get(e.name) or (self.run_results.in_bucket(parse_s3_uri(prefix)[0]).child(e.name).uri
                                       if prefix else "")
            if not uri:
                raise BackendError(f"the stack has no results URI for experiment {e.name} (output experiment_results)")
            self.watched.append(Watched(name=e.name, uri=uri if uri.endswith("/") else uri + "/",
                                        timeout_s=timeout, deadline=now + cumulative))
        progress.line(f"{len(self.watched)} experiment(s) running as Jobs; results: {prefix or '(see outputs)'}")

    # -- watch
    def _connect_kube(self) -> None:
        from bench import kube

        try:
            access = kube.access_from_kubeconfig(self.outputs.get("kubeconfig"),
                                                 self.outputs.get("cluster_name") or "", self.cfg.region)
            self.kube = kube.KubeClient(access)
        except Exception as e:  # noqa: BLE001
            self.kube_state = "unreachable"
            progress.line(f"warning: no Kubernetes access ({type(e).__name__}: {e}); following S3 only", err=True)

    def _kube_look(self, w: Watched) -> None:
        from bench import kube

        if self.kube is None or self.kube_state == "unreachable":
            return
        try:
            pods = self.kube.pods(self.cfg.namespace, kube.experiment_selector(w.name, self.cfg.run_id))
            self.kube_state = "ok"
        except Exception as e:  # noqa: BLE001 - an unreachable API is a warning, never a failure
            self.kube_state = "unreachable"
            progress.line(f"warning: the Kubernetes API does not answer ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); following S3 only", err=True)
            return
        state, w.reasons = kube.summarize(pods)
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
        from bench import s3_results

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
                        w.summary = s3_results.read_json(self.s3, w.uri, "summary.json", self.not_before)
                        if w.summary is None:
                            w.progress = s3_results.read_json(self.s3, w.uri, "progress.json",
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
        if state == "succeeded":
            tp = (s.get("throughput") or {}).get("samples_per_s_total")
            progress.line(f"[{w.name}] succeeded" + (f": {tp} samples/s" if tp else ""))
        elif w.summary is not None:
            progress.line(f"[{w.name}] FAILED: {s.get('error') or 'no exception in the log tail'}", err=True)
            for line in (s.get("log_tail") or [])[-10:]:
                progress.line(f"[{w.name}]   | {line}", err=True)

    # -- teardown
    def teardown(self, ctl: Control) -> bool:
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
            return self._scale_to_zero()
        progress.line(f"pulumi destroy -s {self.stack}" + (f" ({ctl.reason})" if ctl.reason else ""))
        events = UpProgress([], verb="destroy", out=lambda text: None)  # a line per group is enough for up
        ok, left = destroy_with_retry(self.stk, stack=self.stack, on_event=events,
                                      log=lambda m: progress.line(m, err=True))
        pulumi_cli.sync_stack_file(self.stack, self.root)
        if ok:
            progress.line(f"destroyed in {clock_text(time.monotonic() - self.teardown_started_at).strip()}; the "
                          "results bucket is kept")
            from bench.audit import audit_after_destroy  # what destroy left behind: exit 1 if anything

            return audit_after_destroy(self.stack, root=self.root, out=progress.line)
        progress.line(f"error: destroy failed twice; {len(left)} resource(s) left"
                      + (": " + "; ".join(left[:15]) + (" ..." if len(left) > 15 else "") if left else "")
                      + f". They cost money until removed: python -m bench destroy {self.stack} "
                      f"(or: pulumi destroy -s {self.stack} --cwd {pulumi_cli.work_dir(self.stack, self.root)})",
                      err=True)
        return False

    def _scale_to_zero(self) -> bool:
        import boto3

        cluster = self.outputs.get("cluster_name")
        groups = list(self.outputs.get("node_groups") or [])[1:]  # [system, *gpu groups]
        if not cluster or not groups:
            progress.line(f"--keep: the stack has no GPU node groups to scale down (up did not finish?); "
                          f"it is left as it is: python -m bench destroy {self.stack}", err=True)
            return False
        eks = boto3.client("eks", region_name=self.cfg.region)
        ok = True
        for name in groups:
            try:
                current = eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]["scalingConfig"]
                eks.update_nodegroup_config(clusterName=cluster, nodegroupName=name, scalingConfig={
                    "minSize": 0, "desiredSize": 0, "maxSize": max(1, int(current.get("maxSize", 1)))})
                progress.line(f"--keep: node group {name} scaled to 0 nodes")
            except Exception as e:  # noqa: BLE001
                ok = False
                progress.line(f"error: could not scale node group {name} to zero: {type(e).__name__}: {e}", err=True)
        progress.line(f"--keep: the stack stays up (control plane, NAT, system nodes and storage still cost "
                      f"money); destroy it later with: python -m bench destroy {self.stack}")
        return ok

    # -- collect
    def collect(self, ctl: Control) -> list[dict[str, Any]]:
        from bench import s3_results
        from bench.local_backend import show

        rows = []
        by_name = {w.name: w for w in self.watched}
        for e in self.cfg.experiments:
            w = by_name.get(e.name)
            dest = self.run_results.child(e.name).local_dir(self.results_root)
            shape = (f"{e.min_nodes}:{e.max_nodes}" if e.elastic else str(e.max_nodes)) + f"x{e.gpus_per_node}"
            if w is None:
                rows.append({"experiment": e.name, "status": "not run", "shape": shape})
                continue
            try:
                n = s3_results.download(self.s3, w.uri, dest)
            except Exception as ex:  # noqa: BLE001
                raise BackendError(f"could not copy {w.uri} to {dest}: {type(ex).__name__}: {ex}; the results stay "
                                   "on S3") from None
            summary = _read_local_json(dest / "summary.json") if n else None
            if self.not_before is not None and w.summary is None:
                summary = None  # a previous attempt's summary, not this run's
            s = summary or {}
            tp = s.get("throughput") or {}
            status = s.get("status") or ("interrupted" if ctl.reason == "interrupted" else "failed (no summary)")
            if w.state == "timeout":
                status = "failed (timeout)"
            elif w.state == "stopped" and not summary:
                status = "interrupted" if ctl.reason == "interrupted" else f"failed ({ctl.reason})"
            elif w.state == "failed" and not summary:
                status = "failed (" + (w.reasons[0].split(": ", 2)[-1] if w.reasons else "no summary") + ")"
            evaluation = _read_local_json(dest / "eval" / "eval.json") or {}
            rows.append({"experiment": e.name, "status": status, "shape": shape,
                         "steps": (s.get("coverage") or {}).get("steps"), "total": tp.get("samples_per_s_total"),
                         "per_process": tp.get("samples_per_s_per_process"), "wall": s.get("wall_time_s"),
                         "accuracy": evaluation.get("accuracy"), "path": show(dest)})
        if self.watched:
            progress.line(f"results copied to {show(self.run_dir)} (checkpoints stay on S3)")
        return rows


def _read_local_json(path: Path) -> dict[str, Any] | None:
    try:
        return __import__("bench.result_readers").result_readers.reader_for(path.name)(path.read_bytes(), str(path))
    except (OSError, ValueError):
        return None
