"""The report's figures, drawn with matplotlib (object API, PNGs by Agg) from ``bench.results`` DataFrames.

Each ``*_figure`` function returns a matplotlib Figure, or None when the data has nothing
to show (the report then says so in a sentence); ``png_data_uri`` embeds one in a page.
``scaling_table`` is the arithmetic behind the scaling plot: efficiency(N) =
throughput(N) / (N x per-node throughput at the smallest size measured).
"""

from __future__ import annotations

import base64
import functools
import io
from typing import Any

GROUP = ("workload", "gpu", "instance_type", "gpus_per_node", "batch_size", "precision")
STRAGGLER = 1.2  # a rank whose median step time is this much above the experiment's median
# Bounds on what one figure draws, so a 10,000-experiment run gives a readable page, not a 400,000-pixel PNG
MAX_BARS = 60  # experiment runs per bar chart
MAX_CURVES = 20  # experiment runs on the loss plot
MAX_GROUPS = 6  # scaling panels
MAX_STEP_ROWS = 12  # experiment runs in the step-time figure
FRAMEWORK_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3")  # bars of the throughput chart
# Text from a run is drawn as it is: no mathtext ("$...$" would be parsed, and can fail to parse)
SAFE_TEXT = {"text.parse_math": False, "text.usetex": False}


def _figure(nrows: int = 1, ncols: int = 1, **kw):
    """A Figure and its axes, without pyplot: no global state, no GUI backend (PNGs render with Agg)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=kw.pop("figsize"))
    return fig, fig.subplots(nrows, ncols, **kw)


def _plain_text(draw):
    """Runs a figure function with SAFE_TEXT: each Text reads ``text.parse_math`` when it is made."""
    @functools.wraps(draw)
    def wrapped(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(SAFE_TEXT):
            return draw(*args, **kwargs)
    return wrapped


def png_data_uri(fig, dpi: int = 96) -> str:
    """The figure as a ``data:image/png;base64,...`` URI (self-contained page)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context(SAFE_TEXT):
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def labels(df) -> list[str]:
    """Short names for rows: the experiment, prefixed by stack/run where several are shown."""
    many_runs = df[["stack", "run_id"]].drop_duplicates().shape[0] > 1
    return [f"{r.run_id}/{r.experiment}" if many_runs else str(r.experiment) for r in df.itertuples()]


def _per_gpu_word(df) -> str:
    return "process" if set(df["gpu"].dropna()) <= {"cpu"} else "GPU"


@_plain_text
def throughput_figure(df):
    ok = df[df["samples_per_s"].notna()].head(MAX_BARS)
    if ok.empty:
        return None
    names = labels(ok)
    fig, axes = _figure(1, 2, figsize=(11, 0.45 * len(ok) + 1.6))
    word = _per_gpu_word(ok)
    # One colour per framework, named in a legend, so runs of several frameworks compare in one chart.
    frameworks = ok["framework"].fillna("pytorch").astype(str).tolist()
    colour = {f: FRAMEWORK_COLOURS[i % len(FRAMEWORK_COLOURS)] for i, f in enumerate(dict.fromkeys(frameworks))}
    for ax, col, title in ((axes[0], "samples_per_s", "samples/s (all workers)"),
                           (axes[1], "samples_per_s_per_gpu", f"samples/s per {word}")):
        values = ok[col].astype(float).fillna(0).tolist()
        bars = ax.barh(names, values, color=[colour[f] for f in frameworks])
        ax.bar_label(bars, fmt="%.1f", padding=3, fontsize=8)
        ax.set_title(title)
        ax.invert_yaxis()
        ax.margins(x=0.15)
        ax.grid(axis="x", alpha=0.3)
    axes[1].set_yticklabels([])
    if len(colour) > 1:
        from matplotlib.patches import Patch

        axes[1].legend(handles=[Patch(color=c, label=f) for f, c in colour.items()], title="framework",
                       fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def scaling_table(df):
    """Per group of same-workload runs at two or more node counts: throughput, ideal, efficiency."""
    import pandas as pd

    ok = df[(df["status"] == "succeeded") & df["samples_per_s"].notna() & df["nodes"].notna()].copy()
    out = []
    for key, g in ok.fillna({c: "?" for c in GROUP}).groupby(list(GROUP), sort=True):
        by_n = g.groupby("nodes")["samples_per_s"].mean().sort_index()
        if len(by_n) < 2:
            continue
        n0 = by_n.index[0]
        per_node = by_n.iloc[0] / n0
        for n, tp in by_n.items():
            out.append({"group": f"{key[0]} on {key[1]}, batch {key[4]}, {key[5]}", "nodes": int(n),
                        "samples_per_s": round(tp, 3), "ideal_samples_per_s": round(per_node * n, 3),
                        "efficiency": round(tp / (per_node * n), 3)})
    return pd.DataFrame(out, columns=["group", "nodes", "samples_per_s", "ideal_samples_per_s", "efficiency"])


@_plain_text
def scaling_figure(table):
    if table.empty:
        return None
    groups = list(dict.fromkeys(table["group"]))[:MAX_GROUPS]
    fig, axes = _figure(1, len(groups), figsize=(5.5 * len(groups), 4), squeeze=False)
    for ax, name in zip(axes[0], groups):
        g = table[table["group"] == name]
        ax.plot(g["nodes"], g["ideal_samples_per_s"], "--", color="gray", label="ideal (linear)")
        ax.plot(g["nodes"], g["samples_per_s"], "o-", color="#C44E52", label="measured")
        for r in g.itertuples():
            ax.annotate(f"{r.efficiency:.0%}", (r.nodes, r.samples_per_s), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=9)
        ax.set_xticks(list(g["nodes"]))
        ax.set(xlabel="nodes", ylabel="samples/s", title=name)
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _keyed(steps, df):
    """Step lines with the report's label of their experiment run."""
    names = dict(zip(zip(df["stack"], df["run_id"], df["experiment"]), labels(df)))
    keys = list(zip(steps["stack"], steps["run_id"], steps["experiment"]))
    return steps.assign(label=[names.get(k, k[2]) for k in keys])


@_plain_text
def loss_figure(steps, df):
    s = _keyed(steps, df).dropna(subset=["loss"])
    if s.empty:
        return None
    fig, ax = _figure(figsize=(11, 4))
    for name in list(dict.fromkeys(s["label"]))[:MAX_CURVES]:
        g = s[s["label"] == name]
        curve = g.groupby("step")["loss"].mean()
        ax.plot(curve.index, curve.values, label=f"{name} (mean over ranks)")
    if (s["loss"] > 0).all():
        ax.set_yscale("log")
    ax.set(xlabel="step", ylabel="training loss", title="Loss curves")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def restart_steps(g) -> list[int]:
    """The first step logged after each restart of the group (restart counter going up)."""
    firsts = g.groupby("restart")["step"].min().sort_index()
    return [int(step) for restart, step in firsts.items() if restart > 0]


def stragglers(steps) -> list[dict[str, Any]]:
    """Ranks whose median steady step time is STRAGGLER x above their experiment's median rank."""
    out = []
    steady = steps[steps["warmup"] == False].dropna(subset=["step_time_s"])
    for (stack, run_id, exp), g in steady.groupby(["stack", "run_id", "experiment"]):
        med = g.groupby("rank")["step_time_s"].median()
        typical = med.median()
        for rank, m in med.items():
            if typical and m > STRAGGLER * typical:
                out.append({"stack": stack, "run_id": run_id, "experiment": exp, "rank": int(rank),
                            "median_step_s": round(m, 4), "ratio": round(m / typical, 2)})
    return out


@_plain_text
def step_time_figure(steps, df, max_rows: int = MAX_STEP_ROWS):
    s = _keyed(steps, df).dropna(subset=["step_time_s"])
    if s.empty:
        return None
    names = list(dict.fromkeys(s["label"]))[:max_rows]
    fig, axes = _figure(len(names), 2, figsize=(11, 2.6 * len(names)), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 2]})
    for (box_ax, line_ax), name in zip(axes, names):
        g = s[s["label"] == name]
        steady = g[g["warmup"] == False]
        ranks = sorted(g["rank"].unique())
        box_ax.boxplot([steady[steady["rank"] == r]["step_time_s"] for r in ranks],
                       tick_labels=[str(r) for r in ranks], showfliers=True)
        box_ax.set(xlabel="rank", ylabel="step time (s)", title=f"{name}: steady steps")
        for r in ranks:
            line = g[g["rank"] == r].sort_values("wall_time")
            line_ax.plot(range(len(line)), line["step_time_s"], lw=1, label=f"rank {r}")
        first = g[g["rank"] == ranks[0]].sort_values("wall_time").reset_index(drop=True)
        warm = first.index[first["warmup"] == True]
        for i in warm:
            line_ax.axvspan(i - 0.5, i + 0.5, color="#f2e6c9", lw=0)
        for n, i in enumerate(first.index[first["restart"].diff().fillna(0) > 0]):
            line_ax.axvline(i, color="#C44E52", ls="--", lw=1.2, label="restart" if n == 0 else None)
        line_ax.set(xlabel="logged step, in order (shaded: warm-up)", ylabel="step time (s)",
                    title=f"{name}: step time per rank")
        line_ax.legend(fontsize=7, ncol=4, loc="upper right")
        for ax in (box_ax, line_ax):
            ax.title.set_fontsize(9)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


@_plain_text
def bar_figure(df, column: str, xlabel: str, title: str):
    ok = df[df[column].notna()].head(MAX_BARS)
    if ok.empty:
        return None
    fig, ax = _figure(figsize=(11, 0.45 * len(ok) + 1.4))
    bars = ax.barh(labels(ok), ok[column].astype(float), color="#55A868")
    ax.bar_label(bars, fmt="%.4g", padding=3, fontsize=8)
    ax.invert_yaxis()
    ax.margins(x=0.15)
    ax.set(xlabel=xlabel, title=title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
