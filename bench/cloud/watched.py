"""What an AWS run watches: one ``Watched`` per experiment run (each repeat apart), and its line on the board.

``watched_runs`` makes them from the stack's outputs once ``pulumi up`` returned: each experiment's results URI
(``experiment_results``, else under ``results_prefix``; a repeat's in ``repeat_<k>/``) and its deadline, its
``timeout_minutes`` counted from the start of the watch, cumulative where the experiments run in turn (and for an
experiment's repeats, always). ``watch_line`` is what the progress board shows of one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.cloud.stack_operations import clock_text
from bench.lifecycle import BackendError
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
    counted_from: float = 0.0  # monotonic: where ``deadline`` counts from
    waits_for: tuple[str, int] | None = None  # a Capacity Block group and its Ready nodes the clock waits for

    @property
    def finished(self) -> bool:
        return self.state in ("succeeded", "failed", "timeout")


def watched_runs(cfg: Any, outputs: dict[str, Any], run_results: ResultsLocation, now: float) -> list[Watched]:
    """One ``Watched`` per run of each experiment, its URI from the stack's ``outputs`` and its deadline counted
    from ``now`` (monotonic); a BackendError when the outputs give an experiment no results URI."""
    uris = outputs.get("experiment_results") or {}
    prefix = outputs.get("results_prefix") or ""
    watched: list[Watched] = []
    cumulative = 0.0
    for e in cfg.experiments:
        uri = uris.get(e.name) or (run_results.in_bucket(parse_s3_uri(prefix)[0]).child(e.name).uri
                                   if prefix else "")
        if not uri:
            raise BackendError(f"the stack has no results URI for experiment {e.name} (output experiment_results)")
        uri = uri if uri.endswith("/") else uri + "/"
        if cfg.execution != "sequential":
            cumulative = 0.0  # experiments start together; an experiment's repeats run in turn
        for run in e.runs():
            timeout = run.timeout_minutes * 60.0
            cumulative += timeout
            watched.append(Watched(name=run.label, uri=uri + (f"{repeat_folder(run.repeat)}/" if run.repeat else ""),
                                   timeout_s=timeout, deadline=now + cumulative, experiment=e.name,
                                   repeat=run.repeat, counted_from=now))
    return watched


def watch_line(w: Watched, elapsed: float) -> str:
    """The board's line of one experiment run ``elapsed`` seconds into the watch: its summary's figures once it
    ended, else its progress (step, samples/s) and why its pods are not running."""
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
    return f"[{w.name}] {w.state:<9} {step}  {rate}  {clock_text(elapsed).strip()}{why}"
