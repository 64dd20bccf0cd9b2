"""What every figure of the report shares: a matplotlib Figure without pyplot (PNGs by Agg), text drawn as it is,
plain log ticks, the PNG data URI that embeds a figure in the page, the rows' labels and the thinning of long lines.

The figures themselves are in the modules named for them (``bar_plots``, ``scaling_plot``, ``step_plots``,
``busbw_plot``, ``timeline_plot``, ``language_model_plot``); each ``*_figure`` returns a Figure, or None when the
data has nothing to show (the report then says so in a sentence).
"""

from __future__ import annotations

import base64
import functools
import io
import math
from typing import Any

# Bounds on what one figure draws, so a 10,000-experiment run gives a readable page, not a 400,000-pixel PNG
MAX_CURVES = 20  # experiment runs on the loss plot (and busbw curves)
MAX_POINTS = 2_000  # points drawn per line of the loss and step-time figures (``thinned``)
# Text from a run is drawn as it is: no mathtext ("$...$" would be parsed, and can fail to parse)
SAFE_TEXT = {"text.parse_math": False, "text.usetex": False}


def new_figure(nrows: int = 1, ncols: int = 1, **kw):
    """A Figure and its axes, without pyplot: no global state, no GUI backend (PNGs render with Agg)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=kw.pop("figsize"))
    return fig, fig.subplots(nrows, ncols, **kw)


def plain_text(draw):
    """Runs a figure function with SAFE_TEXT: each Text reads ``text.parse_math`` when it is made."""
    @functools.wraps(draw)
    def wrapped(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(SAFE_TEXT):
            return draw(*args, **kwargs)
    return wrapped


def plain_log_ticks(axis) -> None:
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


def per_gpu_word(df) -> str:
    """What one worker of the rows is called: a GPU, or for a CPU run the process standing in for one."""
    return "process" if set(df["gpu"].dropna()) <= {"cpu"} else "GPU"


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
