"""The report's figures, drawn with matplotlib (object API, PNGs by Agg) from ``bench.results.frames`` DataFrames.

Each ``*_figure`` function returns a matplotlib Figure, or None when the data has nothing
to show (the report then says so in a sentence); ``png_data_uri`` embeds one in a page.
``scaling_table`` is the arithmetic behind the scaling plot: efficiency(N) =
throughput(N) / (N x per-node throughput at the smallest size measured).
"""

from __future__ import annotations

import base64
import functools
import io
import math
from typing import Any

GROUP = ("workload", "gpu", "instance_type", "gpus_per_node", "batch_size", "precision")
STRAGGLER = 1.2  # a rank whose median step time is this much above the experiment's median
# Bounds on what one figure draws, so a 10,000-experiment run gives a readable page, not a 400,000-pixel PNG
MAX_BARS = 60  # experiment runs per bar chart
MAX_CURVES = 20  # experiment runs on the loss plot
MAX_GROUPS = 6  # scaling panels
MAX_STEP_ROWS = 12  # experiment runs in the step-time figure
MAX_POINTS = 2_000  # points drawn per line of the loss and step-time figures (``thinned``)
MAX_RANKS_DRAWN = 32  # ranks drawn per experiment run: the slowest and the fastest half each, by median step
MAX_SIZES = 40  # message sizes per busbw curve (8 B to 8 GiB is 31)
MAX_MESSAGE = 2**50  # bytes; past 2**63 numpy holds an int as an object and cannot take its log
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


def _plain_log_ticks(axis) -> None:
    """A log axis labelled in plain numbers (0.01, 0.1, 1, 10). Matplotlib's log formatters write mathtext
    (``$\\mathdefault{10^{0}}$``), which SAFE_TEXT leaves unparsed: the page would show the markup.

    Call it once the data are drawn: the ticks follow the view. Where it holds fewer than two powers of ten (a
    loss from 2.3 to 1.5 holds none), the decades' ticks fall outside it and the axis would show no number at
    all; it is then ticked at 1, 2 and 5 times the powers of ten, or where even those are fewer than two, at
    round values as a linear axis has them (1.6, 1.8, 2, 2.2)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter, NullLocator

    low, high = sorted(axis.get_view_interval())
    powers = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    inside = lambda ticks: [t for t in ticks if low <= t <= high]  # noqa: E731
    if len(inside(10.0 ** k for k in powers)) < 2:
        ticks = inside(m * 10.0 ** k for k in powers for m in (1, 2, 5))
        ticks = ticks if len(ticks) >= 2 else inside(MaxNLocator(nbins=5, steps=[1, 2, 5, 10]).tick_values(low, high))
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def png_data_uri(fig, dpi: int = 96) -> str:
    """The figure as a ``data:image/png;base64,...`` URI (self-contained page)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context(SAFE_TEXT):
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def labels(df) -> list[str]:
    """Short names for rows: the experiment, prefixed by stack/run where several are shown, and ``#k`` for
    repeat k of an experiment that has several rows (repeats); on one line, with the characters no glyph
    shows escaped (``bench.terminal.safe_line``), in the figures as in the page's tables."""
    from bench.terminal import safe_line

    many_runs = df[["stack", "run_id"]].drop_duplicates().shape[0] > 1
    counts = df.groupby(["stack", "run_id", "experiment"], dropna=False).size().to_dict() if len(df) else {}
    out = []
    for r in df.itertuples():
        name = f"{r.run_id}/{r.experiment}" if many_runs else str(r.experiment)
        several = counts.get((r.stack, r.run_id, r.experiment), 1) > 1
        out.append(safe_line(f"{name} #{int(r.repeat)}" if several and getattr(r, "repeat", None) is not None
                             else name))
    return out


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


def _gpu_model(instance_type: Any) -> str | None:
    from core.catalog import aws as catalog

    t = catalog.INSTANCE_TYPES.get(instance_type) if isinstance(instance_type, str) else None
    return t.gpu_model if t else None


SCALING_COLUMNS = ["group", "nodes", "gpus", "runs", "samples_per_s", "ideal_samples_per_s", "efficiency",
                   "anchor_efficiency", "vs_anchor", "anchor"]


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


@_plain_text
def scaling_figure(table):
    """Per group: throughput against the ideal line (left), efficiency against 100% and the anchor (right)."""
    if table.empty:
        return None
    groups = list(dict.fromkeys(table["group"]))[:MAX_GROUPS]
    fig, axes = _figure(len(groups), 2, figsize=(11, 3.8 * len(groups)), squeeze=False)
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


@_plain_text
def repeats_figure(stats):
    """Mean samples/s of each repeated experiment with its 95% interval (``bench.results.frames.repeats`` rows)."""
    ok = stats[stats["ci95_low"].notna()].head(MAX_BARS)
    if ok.empty:
        return None
    fig, ax = _figure(figsize=(11, 0.5 * len(ok) + 1.6))
    names = [f"{r.experiment} ({int(r.succeeded)} runs)" for r in ok.itertuples()]
    mean = ok["samples_per_s_mean"].astype(float)
    err = [mean - ok["ci95_low"].astype(float), ok["ci95_high"].astype(float) - mean]
    ax.errorbar(mean, range(len(ok)), xerr=err, fmt="o", color="#4C72B0", capsize=5, label="mean, 95% interval")
    ax.set_yticks(range(len(ok)), names)
    ax.invert_yaxis()
    ax.set(xlabel="samples/s", title="Repeats: mean throughput with its 95% confidence interval (Student t)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


RUN_KEY = ["stack", "run_id", "experiment", "repeat"]


def drawn_runs(steps, df, columns: list[str], known: str, most: int) -> list[tuple[str, Any]]:
    """[(the report's label of an experiment run, its lines' ``columns``)] for the first ``most`` labels, in the
    order their lines come, of the lines where ``known`` is not missing. Lines are told apart by their run's
    number (``groupby.ngroup``) and copied only for the runs drawn: a label per line, as a tuple, took 3 GB of a
    5,000,000-line report."""
    import numpy as np
    import pandas as pd

    if steps.empty:
        return []
    names = dict(zip(zip(*(df[k] for k in RUN_KEY)), labels(df)))
    run, keys = run_numbers(steps)
    label = [names.get(k, k[2]) for k in keys]
    has = steps[known].notna().to_numpy()
    order = list(dict.fromkeys(label[r] for r in pd.unique(run[has])))[:most]
    return [(name, steps.loc[has & np.isin(run, [r for r, x in enumerate(label) if x == name]), columns])
            for name in order]


def run_numbers(steps) -> tuple[Any, list[tuple]]:
    """(each line's experiment-run number, numbered as the runs first come; each number's (stack, run_id,
    experiment, repeat)): one int a line where the report once built a tuple a line."""
    import numpy as np

    run = steps.groupby(RUN_KEY, sort=False, dropna=False).ngroup().to_numpy()
    firsts = np.unique(run, return_index=True)[1]
    return run, list(steps[RUN_KEY].iloc[firsts].itertuples(index=False, name=None))


def thinned(y, reduce) -> tuple[Any, Any, int]:
    """(x, y, k) of a line drawn at most MAX_POINTS points: past that, each run of k consecutive values is drawn as
    one point, ``reduce`` of them (numpy's ``maximum`` or ``add``: a sum is divided into a mean), at the run's first
    x. Only what is drawn: every statistic the report shows is of every line."""
    import numpy as np

    y = np.asarray(y, dtype=np.float64)
    k = max(1, -(-len(y) // MAX_POINTS))
    if k == 1:
        return np.arange(len(y)), y, 1
    starts = np.arange(0, len(y), k)
    out = reduce.reduceat(y, starts)
    return starts, out / np.diff(np.append(starts, len(y))) if reduce is np.add else out, k


@_plain_text
def loss_figure(steps, df):
    import numpy as np

    drawn = drawn_runs(steps, df, ["step", "loss"], "loss", MAX_CURVES)
    if not drawn:
        return None
    fig, ax = _figure(figsize=(11, 4))
    for name, g in drawn:
        curve = g.groupby("step")["loss"].mean()
        at, mean, k = thinned(curve.values, np.add)
        ax.plot(curve.index[at], mean, label=f"{name} (mean over ranks" + (f"; {k} steps a point)" if k > 1 else ")"))
    if not (steps["loss"] <= 0).any():
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis)
    ax.set(xlabel="step", ylabel="training loss", title="Loss curves")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def per_step(steps):
    """The step lines with ``step_time_s`` as the time of one step: each line's interval time over its ``steps``
    (the trainers log one line per interval of several steps: workloads/train/common/metrics.py), so the figure
    reads in the unit of the summary's step-time percentiles. A line without a usable count is one step."""
    return steps.assign(step_time_s=per_step_times(steps))


def per_step_times(steps):
    """``per_step``'s ``step_time_s`` alone, as a Series, without copying the frame."""
    import pandas as pd

    count = pd.to_numeric(steps["steps"], errors="coerce") if "steps" in steps else pd.Series(1.0, index=steps.index)
    count = count.where(count >= 1, 1.0).fillna(1.0)
    return pd.to_numeric(steps["step_time_s"], errors="coerce") / count


def restart_steps(g) -> list[int]:
    """The first step logged after each restart of the group (restart counter going up)."""
    firsts = g.groupby("restart")["step"].min().sort_index()
    return [int(step) for restart, step in firsts.items() if restart > 0]


def stragglers(steps) -> list[dict[str, Any]]:
    """Ranks whose median steady step time is STRAGGLER x above their experiment's median rank."""
    import pandas as pd

    if steps.empty:
        return []
    out = []
    keep = ((steps["warmup"] == False) & steps["step_time_s"].notna()).to_numpy()  # noqa: E712 -- None is not False
    run, keys = run_numbers(steps)
    medians = pd.Series(per_step_times(steps).to_numpy()[keep]).groupby(
        [run[keep], steps["rank"].to_numpy()[keep]]).median()  # by run number and rank, not by four text columns
    by_run = {r: med.droplevel(0) for r, med in medians.groupby(level=0)}
    known = sorted((keys[r], r) for r in by_run if not any(k is None or k != k for k in keys[r]))
    several: dict[tuple, int] = {}
    for (stack, run_id, exp, _), _ in known:
        several[(stack, run_id, exp)] = several.get((stack, run_id, exp), 0) + 1
    for (stack, run_id, exp, repeat), r in known:
        med = by_run[r]
        typical = med.median()
        name = f"{exp} #{int(repeat)}" if several.get((stack, run_id, exp), 1) > 1 else exp
        for rank, m in med.items():
            if typical and m > STRAGGLER * typical:
                out.append({"stack": stack, "run_id": run_id, "experiment": name, "rank": int(rank),
                            "median_step_s": round(m, 4), "ratio": round(m / typical, 2)})
    return out


def spans(indices) -> list[tuple[int, int]]:
    """Runs of consecutive integers as (first, last): one shaded span each, not one per step."""
    out: list[tuple[int, int]] = []
    for i in indices:
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def drawn_ranks(g, steady, limit: int = MAX_RANKS_DRAWN) -> tuple[list, str]:
    """(the ranks to draw, a note for the title): every rank up to ``limit``; past it the slowest and the fastest
    ``limit`` / 2 by median steady step time (where stragglers and their opposite are), so 2,000 ranks draw as
    fast as 32 (one line and one box each made the report take a minute and 450 MB)."""
    ranks = sorted(g["rank"].unique())
    if len(ranks) <= limit:
        return ranks, ""
    med = (steady if not steady.empty else g).groupby("rank")["step_time_s"].median().sort_values()
    half = limit // 2
    picked = sorted(set(med.index[:half]) | set(med.index[-half:]))
    return picked, f" ({len(picked)} of {len(ranks)} ranks: the fastest and slowest {half})"


@_plain_text
def step_time_figure(steps, df, max_rows: int = MAX_STEP_ROWS):
    import numpy as np

    drawn = [(name, per_step(g)) for name, g in drawn_runs(
        steps, df, ["rank", "step_time_s", "steps", "warmup", "wall_time", "restart"], "step_time_s", max_rows)]
    if not drawn:
        return None
    fig, axes = _figure(len(drawn), 2, figsize=(11, 2.6 * len(drawn)), squeeze=False,
                        gridspec_kw={"width_ratios": [1, 2]})
    for (box_ax, line_ax), (name, g) in zip(axes, drawn):
        steady = g[g["warmup"] == False]
        ranks, shown = drawn_ranks(g, steady)
        g = g[g["rank"].isin(ranks)]
        box_ax.boxplot([steady[steady["rank"] == r]["step_time_s"] for r in ranks],
                       tick_labels=[str(r) for r in ranks], showfliers=True)
        box_ax.set(xlabel="rank", ylabel="time per step (s)", title=f"{name}: steady steps{shown}")
        slowest = 1
        for r in ranks:
            at, y, k = thinned(g[g["rank"] == r].sort_values("wall_time")["step_time_s"], np.maximum)
            line_ax.plot(at, y, lw=1, label=f"rank {r}")
            slowest = max(slowest, k)
        first = g[g["rank"] == ranks[0]].sort_values("wall_time").reset_index(drop=True)
        for start, end in spans(first.index[first["warmup"] == True]):  # noqa: E712 -- elementwise
            line_ax.axvspan(start - 0.5, end + 0.5, color="#f2e6c9", lw=0)
        for n, i in enumerate(first.index[first["restart"].diff().fillna(0) > 0]):
            line_ax.axvline(i, color="#C44E52", ls="--", lw=1.2, label="restart" if n == 0 else None)
        line_ax.set(xlabel="logged interval, in order (shaded: warm-up)", ylabel="time per step (s)",
                    title=f"{name}: time per step per rank (each interval's mean"
                    + (f"; a point: the slowest of {slowest} intervals)" if slowest > 1 else ")"))
        if len(ranks) <= 16:
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


def _bytes(n: float) -> str:
    """8 B, 64 KiB, 1 GiB: a power-of-two size as people write it."""
    n = int(n)
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def _number(v: Any) -> bool:
    """A finite int or float from a results file (not a bool, NaN or infinity)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def busbw_curves(df) -> list[tuple[str, list[tuple[int, float]], Any]]:
    """(label, [(bytes, busbw GB/s)], the published comparison) for each run with a busbw curve."""
    out = []
    for name, r in zip(labels(df), df.itertuples()):
        b = r.busbw if isinstance(r.busbw, dict) else {}
        curve = b.get("curve") if isinstance(b.get("curve"), list) else []
        points = [(p["bytes"], float(p["busbw_gbps"])) for p in curve[:MAX_SIZES]
                  if isinstance(p, dict) and _number(p.get("bytes")) and isinstance(p["bytes"], int) and 0 < p["bytes"] <= MAX_MESSAGE
                  and _number(p.get("busbw_gbps"))]
        e = b.get("expected") if isinstance(b.get("expected"), dict) else {}
        known = isinstance(e.get("compared_at_bytes"), int) and e["compared_at_bytes"] > 0 and _number(e.get("expected_gbps"))
        if points:
            out.append((name, points, e if known else None))
    return out[:MAX_CURVES]


@_plain_text
def busbw_figure(df):
    """All-reduce bus bandwidth against message size (log-log), one line per run; the published
    figure it is compared with, where there is one, as a cross."""
    curves = busbw_curves(df)
    if not curves:
        return None
    fig, ax = _figure(figsize=(11, 4.5))
    for name, points, expected in curves:
        line, = ax.plot([b for b, _ in points], [v for _, v in points], "o-", ms=3, label=name)
        if expected:
            ax.plot([expected["compared_at_bytes"]], [expected["expected_gbps"]], "x", ms=10, mew=2,
                    color=line.get_color(), label=f"{name}: published figure")
    # Plain tick labels (the page draws no mathtext: SAFE_TEXT): 8 B, 1 KiB, 1 MiB, 1 GiB, ...
    sizes = sorted({b for _, points, _ in curves for b, _ in points})
    ax.set_xscale("log", base=2)
    ax.set_xticks([2**k for k in range(sizes[0].bit_length() - 1, sizes[-1].bit_length()) if k % 3 == 0 or
                   2**k in (sizes[0], sizes[-1])])
    ax.set_xticklabels([_bytes(t) for t in ax.get_xticks()], fontsize=8)
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.set(xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)",
           title="All-reduce bus bandwidth (nccl-tests busbw = algbw x 2(n-1)/n)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


MAX_TIMELINES = 6  # runs drawn in the timeline figure
MAX_TIMELINE_EXPERIMENTS = 8  # experiments' stepping bars per run


@_plain_text
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
    fig, axes = _figure(len(shown), 1, figsize=(11, sum(heights)), squeeze=False,
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
