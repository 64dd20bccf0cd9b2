"""The results table's rows of an AWS run, from what each experiment left under its results copied home.

A row's status is the launcher's (summary.json); where the pod could not know why it stopped, the run says:
its timeout, the run's deadline, budget or an interrupt, or why its pods never ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.cloud.watched import Watched
from bench.results.overview import nodes_text, run_figures, table_row
from bench.terminal import show

NOT_KNOWN = ("failed", "interrupted", "failed (no summary)")  # a launcher's status the run may know better


def shape_text(e: Any) -> str:
    """``2x8``, or ``1:2x8`` for an elastic experiment: its nodes (least:most) by GPUs per node."""
    return f"{nodes_text(e)}x{e.gpus_per_node}"


def row_status(fig_status: str | None, w: Watched, *, summary: dict[str, Any] | None, reason: str | None) -> str:
    """The launcher's status (summary_fields: succeeded, failed, diverged, interrupted, deadline, timeout);
    a pod cannot tell why it got SIGTERM, this run can: its timeout, deadline, budget (``reason``) or an interrupt."""
    status = fig_status or ("interrupted" if reason == "interrupted" else "failed (no summary)")
    if w.state == "timeout" and status in NOT_KNOWN:
        status = "timeout"
    elif w.state == "stopped" and status in NOT_KNOWN:
        status = reason if reason in ("interrupted", "deadline") else f"stopped ({reason})"
    elif w.state == "failed" and not summary:
        status = "failed (" + (w.reasons[0].split(": ", 2)[-1] if w.reasons else "no summary") + ")"
    return status


def collected_row(e: Any, w: Watched, dest: Path, *, summary: dict[str, Any] | None,
                  evaluation: dict[str, Any], reason: str | None) -> dict[str, Any]:
    """The row of an experiment run whose results were copied to ``dest`` (``summary``: its summary.json, None when
    there is none of this run; ``reason``: what stopped the run, if anything)."""
    fig = run_figures(summary)
    return table_row(e.label, row_status(fig["status"], w, summary=summary, reason=reason), shape_text(e), fig,
                     wall=fig["wall_s"], accuracy=evaluation.get("accuracy"), path=show(dest))


def read_local_json(path: Path) -> dict[str, Any] | None:
    """A results file copied home (summary.json, the evaluation's JSON), None when missing or unreadable."""
    from bench.results.readers import MAX_JSON_BYTES, reader_for
    from workloads.train.common.files import read_regular

    try:  # a named pipe or a device planted under the name is refused, a huge file read no further than the bound
        return reader_for(path.name)(read_regular(path, MAX_JSON_BYTES), str(path))
    except (OSError, ValueError):
        return None
