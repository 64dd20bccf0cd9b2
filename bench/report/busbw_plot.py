"""The all-reduce bus bandwidth figure: busbw against message size (log-log), one line per run, beside the
published figure it is compared with."""

from __future__ import annotations

import math
from typing import Any

from bench.report.figures import MAX_CURVES, labels, new_figure, plain_text

MAX_SIZES = 40  # message sizes per busbw curve (8 B to 8 GiB is 31)
MAX_MESSAGE = 2**50  # bytes; past 2**63 numpy holds an int as an object and cannot take its log


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


@plain_text
def busbw_figure(df):
    """All-reduce bus bandwidth against message size (log-log), one line per run; the published
    figure it is compared with, where there is one, as a cross."""
    curves = busbw_curves(df)
    if not curves:
        return None
    fig, ax = new_figure(figsize=(11, 4.5))
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
