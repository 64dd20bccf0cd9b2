"""Autostop, part 1 of 4, the rule (pure): when the GPU node groups of a run may go to zero, and why.

The controller (``workloads/train/control/autostop.py``) lists the run's Jobs, turns each into a
``JobState`` (``job_state``) and asks ``decide``; it does the I/O, this module none. It ships
in the code ConfigMap with the rest of ``spec`` and runs on the standard library alone.

A Job of batch/v1 is finished when it carries a ``Complete`` or ``Failed`` condition with
status "True" (Kubernetes API reference, JobStatus.conditions: "When a Job fails, one of the
conditions will have type 'Failed' and status true ... When a Job is completed, one of the
conditions will have type 'Complete' and status true"). A suspended Job (``spec.suspend``)
has no pods; it waits for a gate (``workloads/train/control/gate.py``), and once every gate of the run
has ended, a Job still suspended will never start (its gate found a required Job Failed).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

EVAL_TIMEOUT_MINUTES = 30  # an evaluation Job's activeDeadlineSeconds (workloads.job_manifests)
START_SLACK_MINUTES = 60  # scheduling, GPU node scale-up and image pulls, per experiment
DEADLINE_MARGIN_MINUTES = 30  # on top of the experiments' budgets: uploads, teardown of pods
DEFAULT_IDLE_MINUTES = 5
GATE_COMPONENT = "gate"  # app.kubernetes.io/component of gate Jobs (workloads.job_manifests)
SCALE = "scale-to-zero"
WAIT = "wait"


def experiment_budget_minutes(e: Any) -> int:
    """How long experiment ``e`` (a core.config.model.Experiment) may take: timeout, evaluation, start-up slack."""
    return e.timeout_minutes + (EVAL_TIMEOUT_MINUTES if e.evaluate else 0) + START_SLACK_MINUTES


def default_deadline_minutes(experiments: Sequence[Any], execution: str) -> int:
    """The experiments' budgets, summed when they run one after another, the longest when in
    parallel, plus a margin: past it nothing of the run can still be legitimately running."""
    budgets = [experiment_budget_minutes(e) * e.repeats for e in experiments]  # repeats: one after another
    total = sum(budgets) if execution == "sequential" else max(budgets, default=0)
    return total + DEADLINE_MARGIN_MINUTES


def deadline_problems(cfg: Any) -> list[str]:
    """A meaning rule (program.validation): a deadline set shorter than the experiments' own timeouts
    would take the GPUs away from a run that is still allowed to go on."""
    a = cfg.autostop
    if not a.enabled or a.deadline_minutes is None or not cfg.experiments:
        return []
    times = [(e.timeout_minutes + (EVAL_TIMEOUT_MINUTES if e.evaluate else 0)) * e.repeats for e in cfg.experiments]
    least, how = (sum(times), "summed, execution: sequential") if cfg.execution == "sequential" else (
        max(times), "the longest, execution: parallel")
    if a.deadline_minutes >= least:
        return []
    from core.config.fields import problem

    return [problem("autostop.deadline_minutes", a.deadline_minutes,
                    f"is shorter than the experiments' timeouts ({least} min, {how}), so autostop would stop "
                    f"the GPUs of a run still within them; leave it unset for "
                    f"{default_deadline_minutes(cfg.experiments, cfg.execution)}", str(least + DEADLINE_MARGIN_MINUTES))]


@dataclass(frozen=True)
class JobState:
    name: str
    state: str  # Complete | Failed | Suspended | Running
    created_at: float  # epoch seconds (metadata.creationTimestamp)
    ended_at: float | None = None  # when the terminal condition became true
    gate: bool = False  # a gate Job (it may still resume suspended ones)


@dataclass(frozen=True)
class Decision:
    action: str  # SCALE or WAIT
    reason: str
    jobs: Mapping[str, str]  # name -> state, for the record


def _epoch(stamp: str | None) -> float | None:
    """RFC 3339 as the API server writes it ("2026-11-23T22:00:00Z") to epoch seconds."""
    if not stamp:
        return None
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def job_state(job: Mapping[str, Any]) -> JobState:
    """One batch/v1 Job object (as the API server returns it) as a JobState."""
    meta, spec, status = job.get("metadata", {}), job.get("spec", {}), job.get("status") or {}
    state, ended = "Running", None
    for c in status.get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            state = c["type"]
            ended = _epoch(c.get("lastTransitionTime")) or _epoch(status.get("completionTime"))
    if state == "Running" and spec.get("suspend"):
        state = "Suspended"
    labels = meta.get("labels") or {}
    return JobState(name=meta.get("name", "?"), state=state, created_at=_epoch(meta.get("creationTimestamp")) or 0.0,
                    ended_at=ended, gate=labels.get("app.kubernetes.io/component") == GATE_COMPONENT)


def running_jobs(jobs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of the batch/v1 Jobs (as the API server returns them) that hold or will hold pods now: neither
    finished nor suspended (``job_state``), in name order."""
    return sorted(s.name for s in map(job_state, jobs) if s.state == "Running")


def decide(jobs: Iterable[JobState], *, now: float, started_at: float, deadline_minutes: int,
           idle_minutes: int) -> Decision:
    """Scale the GPU groups to zero, or wait; with the reason.

    ``started_at``: the controller's own start (epoch seconds), the clock's origin when the run
    has no Job. The deadline counts from the newest Job's creation (the ``pulumi up`` that made
    the run), so a restarted controller keeps the same deadline.
    """
    jobs = list(jobs)
    record = {j.name: j.state for j in jobs}
    origin = max([j.created_at for j in jobs] or [started_at])
    if now >= origin + deadline_minutes * 60:
        running = sorted(j.name for j in jobs if j.state in ("Running", "Suspended"))
        return Decision(SCALE, f"deadline passed: {deadline_minutes} min since the run's Jobs were created"
                        + (f"; still not finished: {', '.join(running)}" if running else ""), record)
    gates_open = [j.name for j in jobs if j.gate and j.state == "Running"]
    pending = sorted(j.name for j in jobs if j.state == "Running" or (j.state == "Suspended" and gates_open))
    if pending:
        return Decision(WAIT, f"not finished: {', '.join(pending)}", record)
    ends = [j.ended_at for j in jobs if j.ended_at is not None]
    last = max(ends) if ends else origin
    idle = (now - last) / 60
    if idle < idle_minutes:
        return Decision(WAIT, f"every Job finished; idle {idle:.1f} of {idle_minutes} min", record)
    failed = sorted(j.name for j in jobs if j.state == "Failed")
    never = sorted(j.name for j in jobs if j.state == "Suspended")
    detail = "".join([f"; failed: {', '.join(failed)}" if failed else "",
                      f"; never started: {', '.join(never)}" if never else ""])
    what = "every Job finished" if jobs else "the run has no Jobs"
    return Decision(SCALE, f"{what} and the GPU nodes idled {idle:.0f} min (limit {idle_minutes}){detail}", record)
