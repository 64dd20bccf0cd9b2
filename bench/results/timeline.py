"""Where a cloud run's time went: ``bench run``'s phases as one timeline, and the two figures a user can lower.

``bench run`` records wall-clock marks as it goes (``Recorder``) and writes ``timeline.json`` beside the
run's results (``ResultsLocation.key("timeline.json")``, and the same place under ./results/). The
document holds seconds from the run's start, so it reads the same on any machine:

    {"version": 1, "stack", "run_id", "started_at": ISO 8601 UTC, "gpu_nodes": N, "gpu_hourly_usd": x or null,
     "prices": "<region> on-demand list prices, <source>, <date>" (what gpu_hourly_usd is; null in older files),
     "phases": [{"name", "start_s", "end_s", "source"}, ...],          (ordered by start, then end)
     "experiments": [{"name", "pods_started_s", "first_step_s", "last_step_s", "source"}, ...],
     "audit": {"clean": true|false|null, "lines": [...]},
     "figures": {"minutes_to_first_step", "idle_gpu_node_minutes", "idle_gpu_usd", "gpu_billed_minutes"},
     "output": why the run's output stopped before its end (its reader went away), only when it did}

The figures (pure functions below, tested on fixture timelines):
- ``minutes_to_first_step``: from ``bench run``'s start to the first experiment's first finished step.
- ``idle_gpu_node_minutes``: GPU node-minutes billed while no experiment was stepping: the GPU nodes
  (desired sizes) times the part of their billing window, from the node groups' creation to the end of
  the teardown, that no experiment's first-to-last-step span covers.
Standard library only.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Iterable

from core.contract.names import TIMELINE_FILE

VERSION = 1
FILE = TIMELINE_FILE

# The phases in the order a run passes through them (the report draws them in this order).
PREFLIGHT = "preflight"
UP = "pulumi up"
UP_CLUSTER = "up: cluster"
UP_NODE_GROUPS = "up: node groups"
UP_STORAGE = "up: storage"
NODES_READY = "GPU nodes boot and join"
PODS_STARTED = "image pull and pod start"
FIRST_STEP = "start-up to first step"
TRAINING = "training (first to last step)"
TEARDOWN = "teardown"
AUDIT = "audit"
ORDER = (PREFLIGHT, UP, UP_CLUSTER, UP_NODE_GROUPS, UP_STORAGE, NODES_READY, PODS_STARTED, FIRST_STEP,
         TRAINING, TEARDOWN, AUDIT)

# `pulumi up`'s resource groups (eksbench component types, bench.cloud.stack_operations.resource_group)
# that make each part of the build.
UP_PARTS = {UP_CLUSTER: ("EksCluster",), UP_NODE_GROUPS: ("NodeGroup",), UP_STORAGE: ("EfsStorage", "FsxStorage")}


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# The times a run can have: from 1970 (a node whose clock was never set) through 9999 in UTC, the last year a
# datetime holds. ``0001-01-01T00:00:00+14:00`` parses, but its UTC is in year 0, which no datetime can show.
EARLIEST = 0.0
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()
INVALID_TIME = "invalid time"  # how a time that a file gives but that is no time in that range is shown


def parse_iso(text: Any) -> float | None:
    """Epoch seconds of an ISO 8601 time (``Z`` or an offset; naive reads as UTC), None when it is not one
    or falls outside EARLIEST..LATEST: every time read from a run goes through here, so any time it gives
    can be shown (``datetime.fromtimestamp``), subtracted and drawn."""
    if not isinstance(text, str) or not text or len(text) > 64:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
        t = (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()
    except (ValueError, OverflowError):
        return None
    return t if EARLIEST <= t <= LATEST else None


def utc_text(t: float | None) -> str | None:
    """``2026-11-27 09:12:39``: ``t`` (epoch seconds, as ``parse_iso`` gives it) in UTC; None for None."""
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def steps_from_summary(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """An experiment's pod start, first and last step (epoch seconds) from its summary.json, or None.

    ``started_at``: the launcher's start inside the container (the image is pulled, the pod runs);
    ``startup.time_to_first_step_s`` counts from there (``EKSBENCH_LAUNCHED_AT``, set by the launcher:
    workloads/train/harness/launch.py, startup.py) to the end of the first step; ``ended_at``: the training
    command's end, so the last step ended at or before it.
    """
    if not summary:
        return None
    started, ended = parse_iso(summary.get("started_at")), parse_iso(summary.get("ended_at"))
    if started is None:
        return None
    startup = summary.get("startup") if isinstance(summary.get("startup"), dict) else {}
    ttfs = startup.get("time_to_first_step_s")
    first = started + float(ttfs) if isinstance(ttfs, (int, float)) and ttfs >= 0 else None
    return {"pods_started": started, "first_step": first, "last_step": ended if first is not None else None,
            "source": "summary.json: started_at, started_at + startup.time_to_first_step_s, ended_at"}


class Recorder:
    """Wall-clock marks taken during a run (epoch seconds from ``clock``); ``document()`` makes the JSON."""

    def __init__(self, *, stack: str, run_id: str, gpu_nodes: int, gpu_hourly_usd: float | None,
                 clock=time.time, prices: str | None = None):
        self.clock = clock
        self.started = clock()
        self.stack, self.run_id = stack, run_id
        self.gpu_nodes, self.gpu_hourly_usd = gpu_nodes, gpu_hourly_usd  # None: no price in the stack's region
        self.prices = prices  # the GPU price's region, source and date (core.catalog.aws.price_label)
        self.spans: dict[str, tuple[float, float, str]] = {}
        self.open: dict[str, tuple[float, str]] = {}
        self.experiments: dict[str, dict[str, Any]] = {}
        self.audit: dict[str, Any] = {"clean": None, "lines": []}
        # The cluster's clock minus this machine's, in seconds (the API server's Date header:
        # bench.cloud.kube.clock_offset); None until the API answers. Marks from the cluster (pods,
        # kubelets, the launcher's summary) are moved onto this machine's clock by it.
        self.cluster_offset: float | None = None

    def from_cluster(self, t: float | None) -> float | None:
        """A cluster-clock mark on this machine's clock (unchanged while the offset is unknown)."""
        return None if t is None else t - (self.cluster_offset or 0.0)

    @property
    def clock_note(self) -> str:
        """Which clock the document's marks are on, and how the cluster's were brought onto it."""
        if self.cluster_offset is None:
            return ("eksbench run's clock; the cluster's marks (pods, nodes, summaries) uncorrected: the Kubernetes "
                    "API did not answer, so its Date header gave no offset")
        return (f"eksbench run's clock; the cluster's marks (pods, nodes, summaries) corrected by the API server's "
                f"Date header (cluster clock {self.cluster_offset:+.1f} s from this machine's, within 1 s)")

    def begin(self, name: str, source: str = "eksbench run's clock") -> None:
        self.open[name] = (self.clock(), source)

    def end(self, name: str) -> None:
        if name in self.open:
            start, source = self.open.pop(name)
            self.spans[name] = (start, self.clock(), source)

    def span(self, name: str, start: float | None, end: float | None, source: str) -> None:
        if start is not None and end is not None and end >= start:
            self.spans[name] = (start, end, source)

    def experiment(self, name: str, *, pods_started: float | None = None, first_step: float | None = None,
                   last_step: float | None = None, source: str = "") -> None:
        """What is known of an experiment; a later call fills only what an earlier one left unknown: the
        first source to see a mark keeps it (the Kubernetes API sees a container start before the
        experiment's summary arrives, and its startedAt is the container's own)."""
        e = self.experiments.setdefault(name, {"pods_started": None, "first_step": None, "last_step": None,
                                               "source": source})
        for key, value in (("pods_started", pods_started), ("first_step", first_step), ("last_step", last_step)):
            if value is not None and e[key] is None:
                e[key] = self.from_cluster(value)
        if source and source not in e["source"]:
            e["source"] = "; ".join(filter(None, (e["source"], source)))

    def document(self) -> dict[str, Any]:
        for name in list(self.open):  # a phase cut short (an exception) ends where the record does
            self.end(name)
        self._derive()
        rel = lambda t: None if t is None else round(t - self.started, 3)  # noqa: E731
        phases = [{"name": n, "start_s": rel(s), "end_s": rel(e), "source": src} for n, (s, e, src) in self.spans.items()]
        phases.sort(key=lambda p: (p["start_s"], ORDER.index(p["name"]) if p["name"] in ORDER else len(ORDER)))
        exps = [{"name": n, "pods_started_s": rel(e["pods_started"]), "first_step_s": rel(e["first_step"]),
                 "last_step_s": rel(e["last_step"]), "source": e["source"]} for n, e in sorted(self.experiments.items())]
        doc = {"version": VERSION, "stack": self.stack, "run_id": self.run_id, "started_at": iso(self.started),
               "clock": self.clock_note,
               "gpu_nodes": self.gpu_nodes, "prices": self.prices,
               "gpu_hourly_usd": round(self.gpu_hourly_usd, 4) if self.gpu_hourly_usd is not None else None,
               "phases": phases,
               "experiments": exps, "audit": dict(self.audit)}
        doc["figures"] = figures(doc)
        return doc

    def _derive(self) -> None:
        """The run-level phases that follow from the experiments: nodes -> pods -> first step -> last step."""
        exps = list(self.experiments.values())
        pods = [e["pods_started"] for e in exps if e["pods_started"] is not None]
        firsts = [e["first_step"] for e in exps if e["first_step"] is not None]
        lasts = [e["last_step"] for e in exps if e["last_step"] is not None]
        ready = self.spans.get(NODES_READY, self.spans.get(UP_NODE_GROUPS))
        if pods and PODS_STARTED not in self.spans:
            after = ready[1] if ready else self.spans.get(UP, (self.started,) * 3)[1]
            self.span(PODS_STARTED, min(after, min(pods)), min(pods),
                      "from the GPU nodes (or up's end) to the first container's start")
        if firsts:
            self.span(FIRST_STEP, min(pods) if pods else min(firsts), min(firsts),
                      "container start to first step: torchrun, rendezvous, imports, build, step 1")
        if firsts and lasts:
            self.span(TRAINING, min(firsts), max(lasts), "first step of any experiment to the last of all")


# ---- figures (pure) -----------------------------------------------------------------------------

def _phase(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((p for p in doc.get("phases") or [] if p.get("name") == name), None)


def stepping_spans(doc: dict[str, Any]) -> list[tuple[float, float]]:
    """Each experiment's [first step, last step], in seconds from the run's start."""
    return [(e["first_step_s"], e["last_step_s"]) for e in doc.get("experiments") or []
            if isinstance(e.get("first_step_s"), (int, float)) and isinstance(e.get("last_step_s"), (int, float))
            and e["last_step_s"] >= e["first_step_s"]]


def union_length(spans: Iterable[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] covered by at least one span."""
    total, cursor = 0.0, lo
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in spans):
        if b <= cursor:
            continue
        total += b - max(a, cursor)
        cursor = b
    return total


def billing_window(doc: dict[str, Any]) -> tuple[float, float] | None:
    """When GPU nodes bill: from the node groups' creation (else up's start) to the teardown's end (else
    the record's last mark). None when no ``pulumi up`` started."""
    start = _phase(doc, UP_NODE_GROUPS) or _phase(doc, UP)
    if start is None:
        return None
    ends = [p["end_s"] for p in doc.get("phases") or [] if p.get("name") != AUDIT]
    end = (_phase(doc, TEARDOWN) or {}).get("end_s", max(ends, default=start["start_s"]))
    return start["start_s"], max(start["start_s"], end)


def minutes_to_first_step(doc: dict[str, Any]) -> float | None:
    firsts = [e["first_step_s"] for e in doc.get("experiments") or [] if isinstance(e.get("first_step_s"), (int, float))]
    return round(min(firsts) / 60, 2) if firsts else None


def idle_gpu_node_minutes(doc: dict[str, Any]) -> float | None:
    window = billing_window(doc)
    if window is None or not doc.get("gpu_nodes"):
        return None
    lo, hi = window
    idle_s = (hi - lo) - union_length(stepping_spans(doc), lo, hi)
    return round(doc["gpu_nodes"] * idle_s / 60, 2)


def figures(doc: dict[str, Any]) -> dict[str, Any]:
    idle = idle_gpu_node_minutes(doc)
    window = billing_window(doc)
    nodes = doc.get("gpu_nodes") or 0
    hourly = doc.get("gpu_hourly_usd")
    per_node_hour = hourly / nodes if nodes and isinstance(hourly, (int, float)) else None  # None: no price
    return {"minutes_to_first_step": minutes_to_first_step(doc), "idle_gpu_node_minutes": idle,
            "idle_gpu_usd": round(idle / 60 * per_node_hour, 2) if idle is not None and per_node_hour else None,
            "gpu_billed_minutes": round((window[1] - window[0]) / 60, 2) if window else None}
