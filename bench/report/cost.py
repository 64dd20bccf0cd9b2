"""The report's "Cost per result" table: ``bench.results.cost`` for every run, estimates labelled with the price date.

Rows and words only; ``bench.report.page`` draws the table."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from bench.results import cost


def cost_rows(rows: Sequence[Mapping[str, Any]], names: Sequence[str],
              timelines: Mapping[tuple, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One table row per run; ``timelines`` by (stack, run_id) where a run has one."""
    out = []
    for r, name in zip(rows, names):
        c = cost.row_cost(r, (timelines or {}).get((r.get("stack"), r.get("run_id"))))
        s = c["seconds"]
        out.append({"experiment": name, "usd_per_1k_samples": c["usd_per_1k_samples"],
                    "usd_per_epoch": c["usd_per_epoch"], "usd_experiment": c["usd_experiment"],
                    "before": _cell(s[cost.BEFORE], c["usd_before_first_step"]),
                    "steps": _cell(s[cost.STEPS], c["usd_steps"]),
                    "after": _cell(s[cost.AFTER], c["usd_after_last_step"]),
                    "notes": "; ".join(n for n in c["notes"] if n != cost.NOT_IN_POD) or None,
                    "estimate": c["estimate"]})
    return out


def _cell(seconds: float | None, usd: float | None) -> str | None:
    if seconds is None:
        return None
    return f"{seconds:,.0f} s" + (f" (${usd:,.4g})" if usd is not None else "")


COLUMNS = [("experiment", "experiment"), ("usd_per_1k_samples", "USD per 1,000 samples"),
           ("usd_per_epoch", "USD per epoch"), ("usd_experiment", "USD per experiment"),
           ("before", "before first step"), ("steps", "steps"), ("after", "after last step"), ("notes", "notes")]


def intro(rows: Sequence[Mapping[str, Any]]) -> str:
    label = "; ".join(dict.fromkeys(r["estimate"].removeprefix("estimate: ") for r in rows
                                    if r["usd_experiment"] is not None or r["usd_per_1k_samples"] is not None))
    return (f"Estimates ({label}): price × nodes × time. Per 1,000 samples and per epoch at the steady "
            "throughput; per experiment over the time measured, with the time before the first step and after "
            "the last apart. Without a run's timeline.json the time before its pods started (nodes, image "
            "pull, staging) and teardown are not known, and not counted.")
