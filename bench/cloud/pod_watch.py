"""What the Kubernetes API says of a watched experiment's pods, while an AWS run watches it.

S3 is the authority on how an experiment ended (its summary.json); the cluster, when it answers, says why a pod
is not running yet (``bench.cloud.kube.summarize``: its pods' states, the namespace's Events, and on an FSx stack
the nodes, where a failed Lustre client shows), starts the fatal clock on a reason that will not clear, shows a
failing pod's last log lines once, and marks the run's timeline with the pods' start and the nodes' readiness.
When the run gives up on an experiment run whose pods cannot run (``fail_jobs``), its unfinished Jobs are failed in
the cluster at once, their pending pods with them: Cluster Autoscaler, whose node template promises the Lustre-ready
label, would otherwise launch nodes for them up to the group's ``max_size`` until the Jobs' own deadline.
An API that does not answer is a warning, never a failure: the run follows S3 only.

One look at the cluster (``look`` for each experiment still running, all with the look's time) reads each
experiment's pods, but the namespace's Events and the nodes once: with a sweep of 12 experiment runs on an FSx
stack, 14 requests a look rather than 48.
"""

from __future__ import annotations

import time
from typing import Any

from bench import progress
from bench.cloud import run_timeline
from bench.cloud.watched import Watched
from bench.results import timeline as T


class PodWatch:
    """The run's Kubernetes client (None until ``connect``) and whether the API answers (``state``)."""

    def __init__(self, cfg: Any, timeline: T.Recorder):
        self.cfg, self.timeline = cfg, timeline
        self.client: Any = None
        self.state = "unknown"  # unknown | ok | unreachable
        self._look_at: float | None = None  # the time of the look the Events and nodes in _shared belong to
        self._shared: dict[str, list] = {}

    def connect(self, outputs: dict[str, Any]) -> None:
        """A client from the stack's kubeconfig output; without one, a warning and S3 only."""
        from bench.cloud import kube

        try:
            access = kube.access_from_kubeconfig(outputs.get("kubeconfig"), outputs.get("cluster_name") or "",
                                                 self.cfg.region)
            self.client = kube.KubeClient(access)
        except Exception as e:  # noqa: BLE001
            self.state = "unreachable"
            progress.line(f"warning: no Kubernetes access ({type(e).__name__}: {e}); following S3 only", err=True)

    def _once(self, what: str, read: Any) -> list:
        """``read()`` the first time this look asks for ``what``, then the same list; [] where it raises."""
        if what not in self._shared:
            try:
                self._shared[what] = read()
            except Exception:  # noqa: BLE001 - without them, the pods' own states still count
                self._shared[what] = []
        return self._shared[what]

    def look(self, w: Watched, at: float) -> None:
        """``w``'s state and reasons from its pods, its fatal clock, the timeline's marks, and a failing pod's log.
        ``at``: the look's time, the same for every experiment of one look (the Events and nodes are read once)."""
        from bench.cloud import kube

        if self.client is None or self.state == "unreachable":
            return
        if at != self._look_at:
            self._look_at, self._shared = at, {}
        pods = self._pods(w)
        if pods is None:
            return
        # a volume that does not mount shows only in the pods' Events
        events = self._once("events", lambda: self.client.events(self.cfg.namespace))
        state, w.reasons = kube.summarize(pods, events, self._nodes_if_fsx())
        self._mark_timeline(w, pods)
        if state and not w.finished:
            w.state = state if state != "succeeded" else "running"
        if any(kube.is_fatal(r) for r in w.reasons):
            w.fatal_since = w.fatal_since or time.monotonic()
        else:
            w.fatal_since = None
        if state == "failing" and not w.shown_log:
            w.shown_log = True
            self._show_failed_pod_log(w, pods)

    def fail_jobs(self, w: Watched) -> list[str]:
        """``w``'s unfinished Jobs failed in the cluster: ``activeDeadlineSeconds`` set to 1 (a field a Job may
        change; the Job controller then fails it, DeadlineExceeded, and deletes its pods), so a gate waiting on it
        goes on as after a timeout and nothing keeps nodes coming for its pods. The names of those failed; a warning
        where the API does not answer (they stay until their own deadline or the teardown)."""
        from bench.cloud import kube
        from core.config.autostop import running_jobs

        if self.client is None:
            return []
        try:
            jobs = self.client.jobs(self.cfg.namespace, kube.experiment_selector(w.experiment or w.name,
                                                                                 self.cfg.run_id, w.repeat))
            names = running_jobs(jobs)
            for name in names:
                self.client.patch_job(self.cfg.namespace, name, {"spec": {"activeDeadlineSeconds": 1}})
        except Exception as e:  # noqa: BLE001 - the teardown (or the Jobs' own deadline) still ends them
            progress.line(f"warning: [{w.name}] could not stop its Jobs ({type(e).__name__}: {e}); their pods wait "
                          "until the Jobs' deadline or the teardown", err=True)
            return []
        if names:
            progress.line(f"[{w.name}] failed its Job(s) in the cluster, so no node is launched for their pods: "
                          + ", ".join(names), err=True)
        return names

    def _pods(self, w: Watched) -> list | None:
        """The pods of ``w`` (its experiment, run and repeat); None, with a warning, when the API does not answer."""
        from bench.cloud import kube

        try:
            pods = self.client.pods(self.cfg.namespace, kube.experiment_selector(w.experiment or w.name,
                                                                                 self.cfg.run_id, w.repeat))
            self.state = "ok"
            return pods
        except Exception as e:  # noqa: BLE001 - an unreachable API is a warning, never a failure
            self.state = "unreachable"
            progress.line(f"warning: the Kubernetes API does not answer ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); following S3 only", err=True)
            return None

    def nodes(self) -> list:
        """The cluster's nodes as this look read them ([] where the API did not answer)."""
        return self._once("nodes", self.client.nodes)

    def _nodes_if_fsx(self) -> list:
        """The cluster's nodes on an FSx stack (a node whose Lustre client failed shows only there), else []."""
        if getattr(getattr(self.cfg, "storage", None), "kind", None) != "fsx":
            return []
        return self._once("nodes", self.client.nodes)

    def _mark_timeline(self, w: Watched, pods: list) -> None:
        """The pods' first container start and the nodes' readiness, on our clock, in the run's timeline."""
        from bench.cloud import kube

        if getattr(self.client, "clock_offset", None) is not None:  # cluster marks onto our clock (timeline)
            self.timeline.cluster_offset = self.client.clock_offset
        self.timeline.experiment(w.name, pods_started=kube.containers_started_at(pods),
                                 source="Kubernetes API: the first container's startedAt")
        if T.NODES_READY not in self.timeline.spans:
            run_timeline.record_nodes_ready(self.timeline, self._once("nodes", self.client.nodes))

    def _show_failed_pod_log(self, w: Watched, pods: list) -> None:
        """The first failed pod's reasons and its last 15 log lines (its previous container's, where it restarted)."""
        from bench.cloud import kube

        for pod in pods:
            if kube.pod_failed(pod):
                name = pod["metadata"]["name"]
                try:
                    tail = self.client.log_tail(self.cfg.namespace, name, lines=15, previous=True) or \
                        self.client.log_tail(self.cfg.namespace, name, lines=15)
                except Exception:  # noqa: BLE001
                    tail = []
                progress.line(f"[{w.name}] {name}: " + "; ".join(w.reasons[:3]), err=True)
                for line in tail[-15:]:
                    progress.line(f"[{w.name}]   | {line}", err=True)
                break
