"""The report's bar charts, one bar per experiment run: throughput (all workers and per GPU, coloured by
framework), the repeats' means with their 95% intervals, and any one column (time to accuracy, cost)."""

from __future__ import annotations

from bench.report.figures import labels, new_figure, per_gpu_word, plain_text

MAX_BARS = 60  # experiment runs per bar chart
FRAMEWORK_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3")  # bars of the throughput chart


@plain_text
def throughput_figure(df):
    """samples/s of each experiment run, all workers (left) and per GPU (right), one colour per framework."""
    ok = df[df["samples_per_s"].notna()].head(MAX_BARS)
    if ok.empty:
        return None
    names = labels(ok)
    fig, axes = new_figure(1, 2, figsize=(11, 0.45 * len(ok) + 1.6))
    word = per_gpu_word(ok)
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


@plain_text
def repeats_figure(stats):
    """Mean samples/s of each repeated experiment with its 95% interval (``bench.results.frames.repeats`` rows)."""
    ok = stats[stats["ci95_low"].notna()].head(MAX_BARS)
    if ok.empty:
        return None
    fig, ax = new_figure(figsize=(11, 0.5 * len(ok) + 1.6))
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


@plain_text
def bar_figure(df, column: str, xlabel: str, title: str):
    """``column`` of each experiment run that has it, as one bar each."""
    ok = df[df[column].notna()].head(MAX_BARS)
    if ok.empty:
        return None
    fig, ax = new_figure(figsize=(11, 0.45 * len(ok) + 1.4))
    bars = ax.barh(labels(ok), ok[column].astype(float), color="#55A868")
    ax.bar_label(bars, fmt="%.4g", padding=3, fontsize=8)
    ax.invert_yaxis()
    ax.margins(x=0.15)
    ax.set(xlabel=xlabel, title=title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
