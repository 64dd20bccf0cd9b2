"""The scaling figure and the arithmetic behind it: ``scaling_table`` gives, per sweep over node counts,
efficiency(N) = throughput(N) / (N x per-node throughput at the smallest size measured), beside the published
anchor; ``scaling_figure`` draws it against the ideal line."""

from __future__ import annotations

from typing import Any

from bench.report.figures import new_figure, plain_text

GROUP = ("workload", "gpu", "instance_type", "gpus_per_node", "batch_size", "precision")
MAX_GROUPS = 6  # scaling panels
SCALING_COLUMNS = ["group", "nodes", "gpus", "runs", "samples_per_s", "ideal_samples_per_s", "efficiency",
                   "anchor_efficiency", "vs_anchor", "anchor"]


def _gpu_model(instance_type: Any) -> str | None:
    from core.catalog import aws as catalog

    t = catalog.INSTANCE_TYPES.get(instance_type) if isinstance(instance_type, str) else None
    return t.gpu_model if t else None


def scaling_table(df):
    """Per group of one run's same-workload experiments at two or more node counts (a sweep over nodes:
    core.config.sweep):
    throughput (the mean over repeats), ideal, efficiency(N) = throughput(N) / (N / N0 x throughput(N0)),
    N0 the smallest size measured (1 node in a sweep that starts there), and the published anchor for
    the workload and precision (core.catalog.scaling_anchors) with our efficiency over its."""
    import pandas as pd

    from core.catalog.scaling_anchors import anchor_for

    ok = df[(df["status"] == "succeeded") & df["samples_per_s"].notna() & df["nodes"].notna()].copy()
    many_runs = ok[["stack", "run_id"]].drop_duplicates().shape[0] > 1
    out = []
    # One sweep is one run's experiments with the same settings at several sizes (a run's repeats averaged)
    for (stack, run_id, *key), g in ok.fillna({c: "?" for c in GROUP}).groupby(["stack", "run_id", *GROUP],
                                                                              sort=True):
        by_n = g.groupby("nodes")["samples_per_s"].agg(["mean", "size"]).sort_index()
        if len(by_n) < 2:
            continue
        n0 = by_n.index[0]
        per_node = by_n["mean"].iloc[0] / n0
        found = anchor_for(key[0], key[5], _gpu_model(key[2]))
        anchor, exact = found if found else (None, False)
        note = None if anchor is None else anchor.label + ("" if exact else f" (no published row for {key[1]})")
        for n, (tp, runs) in by_n.iterrows():
            eff = tp / (per_node * n)
            out.append({"group": (f"{run_id}: " if many_runs else "") + f"{key[0]} on {key[1]}, batch {key[4]}, "
                                 f"{key[5]}", "nodes": int(n),
                        "gpus": int(n * key[3]) if isinstance(key[3], (int, float)) else None, "runs": int(runs),
                        "samples_per_s": round(tp, 3), "ideal_samples_per_s": round(per_node * n, 3),
                        "efficiency": round(eff, 3),
                        "anchor_efficiency": round(anchor.efficiency, 3) if anchor else None,
                        "vs_anchor": round(eff / anchor.efficiency, 3) if anchor else None, "anchor": note})
    return pd.DataFrame(out, columns=SCALING_COLUMNS)


@plain_text
def scaling_figure(table):
    """Per group: throughput against the ideal line (left), efficiency against 100% and the anchor (right)."""
    if table.empty:
        return None
    groups = list(dict.fromkeys(table["group"]))[:MAX_GROUPS]
    fig, axes = new_figure(len(groups), 2, figsize=(11, 3.8 * len(groups)), squeeze=False)
    for (ax, eff_ax), name in zip(axes, groups):
        g = table[table["group"] == name]
        ax.plot(g["nodes"], g["ideal_samples_per_s"], "--", color="gray", label="ideal (linear)")
        ax.plot(g["nodes"], g["samples_per_s"], "o-", color="#C44E52", label="measured (mean of repeats)")
        for r in g.itertuples():
            ax.annotate(f"{r.efficiency:.0%}", (r.nodes, r.samples_per_s), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=9)
        eff_ax.axhline(1.0, ls="--", color="gray", label="ideal (100%)")
        eff_ax.plot(g["nodes"], g["efficiency"], "o-", color="#C44E52", label="measured")
        anchor = g["anchor_efficiency"].dropna()
        if not anchor.empty:
            eff_ax.axhline(float(anchor.iloc[0]), ls=":", color="#4C72B0", lw=1.5,
                           label=f"anchor: {g['anchor'].iloc[0]}")
        eff_ax.set_ylim(0, 1.15)
        eff_ax.set(xlabel="nodes", ylabel="scaling efficiency", title=f"{name}: efficiency")
        ax.set(xlabel="nodes", ylabel="samples/s", title=name)
        for a in (ax, eff_ax):
            a.set_xticks(list(g["nodes"]))
            a.title.set_fontsize(9)
            a.grid(alpha=0.3)
            a.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig
