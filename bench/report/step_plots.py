"""The report's per-step figures, from ``results.steps`` lines: the loss curves and the step time per rank, with
what they rest on: which experiment runs and ranks are drawn, each line's time of one step, the restarts and the
stragglers (ranks whose median step time is well above their experiment's)."""

from __future__ import annotations

from typing import Any

from bench.report.figures import MAX_CURVES, labels, new_figure, plain_log_ticks, plain_text, thinned

STRAGGLER = 1.2  # a rank whose median step time is this much above the experiment's median
MAX_STEP_ROWS = 12  # experiment runs in the step-time figure
MAX_RANKS_DRAWN = 32  # ranks drawn per experiment run: the slowest and the fastest half each, by median step
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


@plain_text
def loss_figure(steps, df):
    """The mean loss over ranks at each step, one curve per experiment run (log scale where every loss is > 0)."""
    import numpy as np

    drawn = drawn_runs(steps, df, ["step", "loss"], "loss", MAX_CURVES)
    if not drawn:
        return None
    fig, ax = new_figure(figsize=(11, 4))
    for name, g in drawn:
        curve = g.groupby("step")["loss"].mean()
        at, mean, k = thinned(curve.values, np.add)
        ax.plot(curve.index[at], mean, label=f"{name} (mean over ranks" + (f"; {k} steps a point)" if k > 1 else ")"))
    if not (steps["loss"] <= 0).any():
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
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


@plain_text
def step_time_figure(steps, df, max_rows: int = MAX_STEP_ROWS):
    """Per experiment run: a box per rank of its steady step times (left), each rank's time per step in order,
    warm-up shaded and restarts marked (right)."""
    import numpy as np

    drawn = [(name, per_step(g)) for name, g in drawn_runs(
        steps, df, ["rank", "step_time_s", "steps", "warmup", "wall_time", "restart"], "step_time_s", max_rows)]
    if not drawn:
        return None
    fig, axes = new_figure(len(drawn), 2, figsize=(11, 2.6 * len(drawn)), squeeze=False,
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
