"""The report's scaling and repeats sections: throughput against the ideal line and the published
anchor (``core.catalog.scaling_anchors``) for each sweep over nodes, and each repeated experiment's mean with
its 95% interval (``bench.results.frames.repeats``, ``bench.results.confidence``).

Beside ``bench.report.page``, which calls them with its own ``figure`` and ``table``, as the fabric section is.
"""

from __future__ import annotations

from typing import Callable

from bench.report.blocks import empty_section, esc


def scaling_section(df, *, figure: Callable[..., str], table: Callable[..., str]) -> str:
    """Throughput and efficiency against the ideal line and the published anchor, for each sweep over nodes."""
    from bench.report.scaling_plot import scaling_figure, scaling_table
    from core.catalog.scaling_anchors import SOURCE

    t = scaling_table(df)
    head = ("<h2>Scaling efficiency</h2><p>efficiency(N) = throughput(N) / (N × per-node throughput "
            "at the smallest size), for the same workload, hardware, batch and precision at several node counts "
            "(a sweep: nodes: [1, 2, 4]); throughput is the mean of the repeats. The anchor is the "
            "published strong scaling for the workload and precision, 1 → 8 GPUs inside one NVIDIA DGX (NVLink): "
            "scaling at its best. × anchor is our efficiency over the anchor's.</p>")
    if t.empty:
        return empty_section("Scaling efficiency", "one size per workload only; run an experiment at two or more "
                             "node counts (nodes: [1, 2, 4]) for a scaling curve.")
    cols = [("group", "group"), ("nodes", "nodes"), ("gpus", "GPUs"), ("runs", "runs"), ("samples_per_s", "samples/s"),
            ("ideal_samples_per_s", "ideal samples/s"), ("efficiency", "efficiency"),
            ("anchor_efficiency", "anchor efficiency"), ("vs_anchor", "× anchor")]
    anchors = sorted({a for a in t["anchor"].dropna()})
    cited = ("<p class='note'>Anchor" + ("s" if len(anchors) > 1 else "") + ": "
             + esc("; ".join(anchors)) + f". Source: {esc(SOURCE)}.</p>" if anchors else
             "<p class='note'>No published anchor for this workload and precision (core/catalog/scaling_anchors.py).</p>")
    return head + figure(scaling_figure(t), "scaling vs nodes", "") + table(t, cols) + cited


def repeats_section(df, *, figure: Callable[..., str], table: Callable[..., str]) -> str:
    """Each repeated experiment's mean throughput with its 95% interval."""
    from bench.report.bar_plots import repeats_figure
    from bench.results import frames as results
    stats = results.repeats(df)
    head = ("<h2>Repeats</h2><p>Experiments run several times (repeats: N): the mean samples/s of the "
            "succeeded runs with its 95% confidence interval, mean ± t(0.975, n−1) × s / √n (Student t).</p>")
    repeated = stats[stats["runs"] > 1]
    if repeated.empty:
        return empty_section("Repeats", "no experiment was repeated; set repeats: 3 (or more) on an experiment to "
                             "see how much its throughput varies from run to run.")
    cols = [("experiment", "experiment"), ("runs", "runs"), ("succeeded", "succeeded"),
            ("samples_per_s_mean", "mean samples/s"), ("samples_per_s_std", "std dev"),
            ("ci95_low", "95% CI low"), ("ci95_high", "95% CI high"), ("ci95_half_width_pct", "± % of mean")]
    return head + figure(repeats_figure(repeated), "repeats with 95% intervals",
                         "Fewer than two runs of each repeated experiment succeeded: no interval.") + \
        table(repeated, cols)
