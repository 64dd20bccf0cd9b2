"""Dollars per result, not per hour: an estimate from a run's own timings and the catalog's dated prices.

``cost_per_result`` is pure: it takes the run's time split into phases, each before the first
step (provisioning, image pull, staging, torchrun and rendezvous, imports, model build, the
first step), the steps, or after the last step (final checkpoint, exit, upload, teardown), and
the price of the nodes; it gives dollars per 1,000 samples and per epoch at the steady
throughput, and per experiment in total with the time before the first step and after the last
shown apart. Every figure is an estimate: list price x nodes x time, labelled with the price's
region, source and date (``core.catalog.aws.price_label``; a run with no price in its region has none, never
another region's); not a bill (no discounts, Spot or Capacity Block prices, storage or network).

Where the time comes from:

- ``timing_from_timeline``: a run's ``timeline.json`` (``bench.results.timeline``) when it has one: the GPU
  nodes' billing window split at the experiment's first and last step. Provisioning, image pull
  and teardown are known only from there.
- ``timing_from_summary`` otherwise: what the pod measured, the launcher's wall time split by
  the trainer's start-up record (``startup``: launcher to the first step's end) and its loop
  time. The time before the pod started (nodes, image pull) is then unknown and said to be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

BEFORE, STEPS, AFTER = "before first step", "steps", "after last step"
WHERE = (BEFORE, STEPS, AFTER)
NOT_IN_POD = "the time before the pod started (nodes, image pull, staging) is not in the summary: no timeline.json"


@dataclass(frozen=True)
class Phase:
    name: str
    where: str  # BEFORE, STEPS or AFTER
    seconds: float


def _seconds(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v else None


def timing_from_summary(*, wall_s: float | None, loop_seconds: float | None,
                        startup: Mapping[str, Any] | None) -> tuple[list[Phase], list[str]]:
    """(phases, notes) from what the pod measured: ``startup`` (first attempt) to the first step's
    end, then the steps (the loop less its first step), then the rest of the launcher's wall time."""
    notes = [NOT_IN_POD]
    wall, loop = _seconds(wall_s), _seconds(loop_seconds)
    startup = startup or {}
    first = _seconds(startup.get("time_to_first_step_s"))
    # The loop holds the first step, and with a compiled model its compile (a phase of its own,
    # workloads.train.common.startup): both are start-up, not steps.
    phases = startup.get("phases_s") or {}
    first_step = sum(_seconds(phases.get(k)) or 0.0 for k in ("first_step", "compile"))
    if wall is None:
        return [], notes + ["no wall time in the summary"]
    if first is None or loop is None:
        notes.append("no start-up record or loop time: the pod's whole wall time is counted as steps")
        return [Phase("pod (launcher wall time)", STEPS, wall)], notes
    steps = max(loop - first_step, 0.0)
    before = min(first, wall)
    after = max(wall - before - steps, 0.0)
    return [Phase("pod start to first step (torchrun, rendezvous, imports, build, first step)", BEFORE, before),
            Phase("steps", STEPS, min(steps, wall - before)),
            Phase("after the last step (final checkpoint, exit; restarts)", AFTER, after)], notes


def timing_from_timeline(timeline: Mapping[str, Any], experiment: str | None) -> tuple[list[Phase], list[str]]:
    """(phases, notes) for one experiment from ``bench run``'s ``timeline.json`` (``bench.results.timeline``):
    the GPU nodes' billing window (node groups' creation to teardown's end) split at the experiment's
    first and last step. Every experiment of a run shares the run's window, so with several
    experiments each one's time before and after its steps includes the others' (said in the notes).
    """
    import bench.results.timeline as T

    window = T.billing_window(dict(timeline))
    spans = {e.get("name"): e for e in timeline.get("experiments") or [] if isinstance(e, Mapping)}
    e = spans.get(experiment) or {}
    first, last = _seconds(e.get("first_step_s")), _seconds(e.get("last_step_s"))
    if window is None or first is None or last is None or last < first:
        return [], [f"timeline.json has no GPU billing window or no first and last step for {str(experiment)[:60]!r}"]
    lo, hi = window
    notes = [] if len(spans) == 1 else [f"the run's {len(spans)} experiments share its nodes: the time before and "
                                        "after each one's steps is the run's, counted for each"]
    return [Phase("node groups created to first step (boot, join, image pull, start-up)", BEFORE, max(first - lo, 0.0)),
            Phase("steps", STEPS, last - first),
            Phase("last step to teardown's end", AFTER, max(hi - last, 0.0))], notes


def cost_per_result(phases: Sequence[Phase], *, usd_per_node_hour: float | None, nodes: int | None,
                    samples_per_s: float | None, samples_per_epoch: int | None, prices: str,
                    notes: Sequence[str] = (), unpriced: str = "no price for this instance type (or a local run)"
                    ) -> dict[str, Any]:
    """Dollars per 1,000 samples and per epoch (at the steady throughput) and per experiment (the
    phases' time, split before / steps / after), with the estimate's label (``prices``: the price's region,
    source and date); ``unpriced`` is the note where there is no price."""
    out: dict[str, Any] = {"usd_per_hour": None, "usd_per_1k_samples": None, "usd_per_epoch": None,
                           "usd_experiment": None, "usd_before_first_step": None, "usd_steps": None,
                           "usd_after_last_step": None, "seconds": {w: None for w in WHERE}, "phases": [],
                           "estimate": f"estimate: {prices}",
                           "notes": list(notes)}
    secs = {w: sum(p.seconds for p in phases if p.where == w) if any(p.where == w for p in phases) else None
            for w in WHERE}
    out["seconds"] = secs
    if not usd_per_node_hour or not nodes:
        out["notes"].append(unpriced)
        return out
    hourly = usd_per_node_hour * nodes
    usd = lambda s: round(hourly * s / 3600, 6) if s is not None else None  # noqa: E731
    out.update(usd_per_hour=round(hourly, 6), phases=[{"name": p.name, "where": p.where, "seconds": p.seconds,
                                                       "usd": usd(p.seconds)} for p in phases],
               usd_before_first_step=usd(secs[BEFORE]), usd_steps=usd(secs[STEPS]),
               usd_after_last_step=usd(secs[AFTER]))
    if phases:
        out["usd_experiment"] = usd(sum(p.seconds for p in phases))
    if samples_per_s:
        out["usd_per_1k_samples"] = usd(1000 / samples_per_s)
        if samples_per_epoch:
            out["usd_per_epoch"] = usd(samples_per_epoch / samples_per_s)
        else:
            out["notes"].append("no epoch: synthetic data, or the summary has no samples_per_epoch")
    else:
        out["notes"].append("no steady throughput: no cost per sample or epoch")
    return out


def row_cost(row: Mapping[str, Any], timeline: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``cost_per_result`` for a ``bench.results.run_row`` row: its timeline when given, else its summary's timings."""
    from bench.results.run_row import instance_price
    from core.catalog import aws as catalog

    if timeline:
        phases, notes = timing_from_timeline(timeline, row.get("experiment"))
    else:
        phases, notes = timing_from_summary(wall_s=row.get("wall_s"), loop_seconds=row.get("loop_seconds"),
                                            startup=row.get("startup"))
    region, gpu_run = row.get("region"), row.get("gpu") != "cpu"
    price = instance_price(row.get("instance_type"), region) if gpu_run else None
    why = {"unpriced": catalog.no_price(row["instance_type"], region)} if gpu_run and row.get("instance_type") else {}
    return cost_per_result(phases, usd_per_node_hour=price, nodes=row.get("nodes"),
                           samples_per_s=row.get("samples_per_s"), samples_per_epoch=row.get("samples_per_epoch"),
                           prices=catalog.price_label(region), notes=notes, **why)
