"""The report's fabric section: the all-reduce bus bandwidth curve against the published figure,
and each run's NCCL transport as judged against its node group (``core.catalog.fabric``).

Kept beside ``bench.report.page`` (which calls ``fabric_section`` with its own ``figure`` and ``table``) so the page's other sections stay
in one file of their own size; the figure is ``bench.report.busbw_plot.busbw_figure``.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.report.blocks import empty_section


def busbw_rows(df) -> list[dict[str, Any]]:
    """One row per run with a busbw curve: peak, value at 1 GiB, the published figure and the flag."""
    from bench.report.figures import labels

    rows = []
    for name, r in zip(labels(df), df.itertuples()):
        b = r.busbw if isinstance(r.busbw, dict) else None
        if not b:
            continue
        e = b.get("expected") if isinstance(b.get("expected"), dict) else {}
        rows.append({"experiment": name, "status": r.status, "instance_type": r.instance_type, "nodes": r.nodes,
                     "world_size": b.get("world_size"), "peak_gbps": b.get("peak_gbps"),
                     "peak_at_bytes": b.get("peak_at_bytes"), "at_1gib_gbps": b.get("at_1gib_gbps"),
                     "expected_gbps": e.get("expected_gbps"), "compared_at_bytes": e.get("compared_at_bytes"),
                     "fraction": e.get("fraction"), "flags": r.flags,
                     "source": e.get("source") or e.get("note")})
    return rows


def transport_rows(df) -> list[dict[str, Any]]:
    from bench.report.figures import labels

    return [{"experiment": name, "status": r.status, "instance_type": r.instance_type, "fabric": r.fabric,
             "flags": r.flags}
            for name, r in zip(labels(df), df.itertuples()) if r.fabric]


def fabric_section(df, *, figure: Callable[..., str], table: Callable[..., str]) -> str:
    """The section's HTML; ``figure`` and ``table`` are ``bench.report.page``'s, which calls this."""
    from bench.report.busbw_plot import busbw_figure
    from core.catalog.fabric import BELOW_FRACTION, NOT_CHECKED

    rows = busbw_rows(df)
    judged = [r for r in transport_rows(df) if not str(r["fabric"]).startswith(NOT_CHECKED)]
    if not rows and not judged:
        return empty_section("Bus bandwidth (all-reduce)", "no all-reduce run in these results (workload: allreduce "
                             "measures the fabric), and no run on an EFA node group whose NCCL transport to judge.")
    parts = ["<h2>Bus bandwidth (all-reduce)</h2>"]
    if rows:
        parts.append("<p>Bus bandwidth per message size, as nccl-tests defines it: busbw = algbw × 2(n−1)/n, "
                     "algbw = bytes / time, GB/s of 10<sup>9</sup> bytes. A run under "
                     f"{BELOW_FRACTION:.0%} of the published figure for its instance type and node count, at "
                     "the largest message size both measured, is flagged. A local run is gloo over loopback, "
                     "not a fabric figure.</p>")
        parts.append(figure(busbw_figure(df), "busbw per message size", ""))
        cols = [("experiment", "experiment"), ("status", "status"), ("instance_type", "instance"),
                ("nodes", "nodes"), ("world_size", "ranks"), ("peak_gbps", "peak busbw GB/s"),
                ("peak_at_bytes", "at bytes"), ("at_1gib_gbps", "busbw at 1 GiB"),
                ("expected_gbps", "published GB/s"), ("compared_at_bytes", "compared at bytes"),
                ("fraction", "measured / published"), ("flags", "flags"), ("source", "published figure")]
        parts.append(table(rows, cols))
    else:
        parts.append('<p class="note">No allreduce run in these results (an experiment with '
                     "workload: allreduce measures the fabric).</p>")
    if judged:
        parts.append("<p>NCCL's transport in each run, judged against its node group: on an EFA group NCCL should "
                     "use aws-ofi-nccl (NET/OFI); NET/Socket is TCP at a fraction of the bandwidth.</p>")
        parts.append(table(judged, [("experiment", "experiment"), ("status", "status"),
                                    ("instance_type", "instance"), ("fabric", "NCCL transport"),
                                    ("flags", "flags")]))
    return "".join(parts)
