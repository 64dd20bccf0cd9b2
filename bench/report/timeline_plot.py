"""The timeline figure: one panel per run, each phase as a bar over minutes from the run's start, and each
experiment's first-to-last step."""

from __future__ import annotations

from typing import Any

from bench.report.figures import new_figure, plain_text

MAX_TIMELINES = 6  # runs drawn in the timeline figure
MAX_TIMELINE_EXPERIMENTS = 8  # experiments' stepping bars per run


@plain_text
def timeline_figure(timelines: list[tuple[str, dict[str, Any]]]):
    """One panel per run (``bench.results.timeline`` documents): each phase as a bar over minutes from the run's start,
    and each experiment's first-to-last step; None when there is no timeline."""
    from bench.results import timeline as T

    shown = timelines[:MAX_TIMELINES]
    if not shown:
        return None
    rows = [[p for p in doc.get("phases") or []]
            + [{"name": f"steps: {e['name']}", "start_s": e["first_step_s"], "end_s": e["last_step_s"]}
               for e in (doc.get("experiments") or [])[:MAX_TIMELINE_EXPERIMENTS]
               if e.get("first_step_s") is not None and e.get("last_step_s") is not None] for _, doc in shown]
    heights = [0.32 * len(r) + 1.0 for r in rows]
    fig, axes = new_figure(len(shown), 1, figsize=(11, sum(heights)), squeeze=False,
                           gridspec_kw={"height_ratios": heights})
    colors = {T.TEARDOWN: "#C44E52", T.AUDIT: "#8172B2", T.TRAINING: "#55A868"}
    for ax, (label, doc), phases in zip(axes[:, 0], shown, rows):
        names = [p["name"] for p in phases]
        starts = [p["start_s"] / 60 for p in phases]
        widths = [max((p["end_s"] - p["start_s"]) / 60, 0.02) for p in phases]
        ax.barh(names, widths, left=starts, color=[colors.get(n, "#4C72B0" if not n.startswith("steps:") else "#8DCB9B")
                                                  for n in names])
        ax.invert_yaxis()
        ax.set(xlabel="minutes from the start of eksbench run", title=label)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
