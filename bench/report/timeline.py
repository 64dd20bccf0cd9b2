"""The report's first section: where a cloud run's time went (``timeline.json``, ``bench.results.timeline``).

It leads with the two figures a user can lower: minutes from ``bench run``'s start to the first
training step, and GPU node-minutes billed while no experiment was stepping (with what they cost at
the run's GPU price). The figures are derived again from the marks here (``bench.results.timeline.figures``),
never taken from the file, which lies in the bucket beside what the pods wrote.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.report.blocks import empty_section, esc
from bench.results import timeline as T


def load_timelines(sources: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(a label naming the stack and the run, document) of each readable ``timeline.json`` under the sources."""
    from bench.results.files import files_named
    from bench.results.readers import MAX_JSON_BYTES, read_timeline

    out, seen = [], set()
    for source in sources:
        for where, raw in files_named(source, T.FILE, MAX_JSON_BYTES):
            doc = read_timeline(raw, where)
            if doc is None or where in seen:
                continue
            seen.add(where)
            doc = {**doc, "phases": doc.get("phases") or [], "experiments": doc.get("experiments") or []}
            doc["figures"] = T.figures(doc)
            out.append((f"stack {doc.get('stack') or '?'}, run {doc.get('run_id') or '?'}", doc))
    return out


def _minutes(value: Any) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def timeline_section(timelines: list[tuple[str, dict[str, Any]]], *, table: Callable[..., str],
                     figure: Callable[..., str]) -> str:
    """The section's HTML; ``table`` and ``figure`` are the report's own renderers (bench.report.page)."""
    from bench.report.timeline_plot import MAX_TIMELINES, timeline_figure

    head = "<h2>Where the time went</h2>"
    if not timelines:
        return empty_section("Where the time went", "no timeline.json in these results (eksbench run on AWS "
                             "writes one beside the run's results; local runs have none).")
    rows = []
    for label, doc in timelines:
        f = doc["figures"]
        audit = (doc.get("audit") or {}).get("clean")
        rows.append({"run": label, "first_step": _minutes(f["minutes_to_first_step"]),
                     "idle": _minutes(f["idle_gpu_node_minutes"])
                     + (f" (about ${f['idle_gpu_usd']:.2f} at {doc.get('prices') or 'the GPU price the run recorded'})"
                        if f.get("idle_gpu_usd") else ""),
                     "billed": _minutes(f["gpu_billed_minutes"]), "nodes": doc.get("gpu_nodes"),
                     "audit": "nothing left" if audit is True else "LEFTOVERS" if audit is False else "not run"})
    cols = [("run", "run"), ("first_step", "minutes to the first step"),
            ("idle", "GPU node-minutes billed while nothing stepped"), ("billed", "GPU billing window, minutes"),
            ("nodes", "GPU nodes"), ("audit", "audit after destroy")]
    intro = ("<p>The figures a run can lower: minutes from eksbench run's start to the first training "
             "step, and GPU node-minutes billed while no experiment was stepping (GPU nodes × the part of their "
             "billing window, node groups' creation to the teardown's end, that no experiment's first-to-last step "
             "covers).</p>")
    fig = timeline_figure(timelines)
    more = (f"<p class='note'>The figure shows the first {MAX_TIMELINES} of {len(timelines)} runs.</p>"
            if len(timelines) > MAX_TIMELINES else "")
    return head + intro + table(rows, cols) + figure(fig, "timeline of each run", "") + more + "".join(
        f"<details><summary>{esc(label)}: audit</summary><pre>"
        f"{esc(chr(10).join((doc.get('audit') or {}).get('lines') or ['(no audit lines)']))}</pre></details>"
        for label, doc in timelines)
