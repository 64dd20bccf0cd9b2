"""The results table's rows of a local run, and the ``not run`` summary of an experiment it never started.

An experiment that ran has a row from its summary.json (``bench.results.overview.run_figures``), its status
corrected by what only the run knows (its timeout, what stopped the run, a failed evaluation). One that the run
stopped before it started has a row too, and a summary.json saying what stopped the run first, so ``status``,
the report and ``results.load`` show it beside the experiments that ran.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.results.overview import nodes_text, run_figures, table_row
from bench.terminal import show
from core.contract import summary_fields as F


def shape_text(e: Any) -> str:
    """``2x1``, or ``1:2x1`` for an elastic experiment: its nodes (least:most) by processes per node."""
    return f"{nodes_text(e)}x{e.procs_per_node}"


def row_status(fig_status: str | None, stop_reason: str | None, *, timed_out: bool, stopped_by: str | None,
               evaluation: dict[str, Any] | None) -> str:
    """An experiment's status in the table: what stopped it, as the launcher recorded it (summary_fields:
    succeeded, failed, diverged, interrupted, deadline, timeout); where no summary says, what this run knows."""
    status = fig_status or (F.TIMEOUT if timed_out else stopped_by) or "failed (no summary)"
    if timed_out or stopped_by:
        stopped = F.TIMEOUT if timed_out else stopped_by
        status = stopped if status in (F.FAILED, F.INTERRUPTED) else status
    if status == F.INTERRUPTED and stop_reason in F.USER_SIGNALS.values():
        status = f"{status} ({stop_reason})"  # the signal the user sent: interrupted (Ctrl-C)
    if evaluation and "error" in evaluation:
        status = "failed (evaluation)"
    return status


def run_row(e: Any, summary: dict[str, Any] | None, *, timed_out: bool, stopped_by: str | None,
            evaluation: dict[str, Any] | None, wall: float) -> dict[str, Any]:
    """The results table's row of an experiment the run started, from its summary.json (None: none written)."""
    fig = run_figures(summary)
    status = row_status(fig["status"], fig["stop_reason"], timed_out=timed_out, stopped_by=stopped_by,
                        evaluation=evaluation)
    acc = evaluation.get("accuracy") if evaluation else None
    return table_row(e.label, status, shape_text(e), fig, wall=round(wall, 1), accuracy=acc,
                     path=show(Path(e.results_dir)))


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
