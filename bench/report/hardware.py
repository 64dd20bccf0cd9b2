"""The report's hardware section, under the step-time chart: per node, the GPUs' utilisation, memory and power over
the run (``results.telemetry``'s samples), each run's figures and energy per result, and a flag on a run whose
GPUs idled a quarter of its steady time or more, or throttled (``bench.results.hardware.telemetry_flags``).

A run without GPU telemetry (a local CPU run) is one line: "no GPU telemetry on this run", with why. Kept beside
``bench.report.page``, which calls ``hardware_section`` with its own ``figure`` and ``table``.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.report.blocks import empty_section, esc
from bench.results.hardware import telemetry_flags
from core.contract import summary_fields as F

MAX_RUNS_DRAWN = 12  # experiment runs in the timeline figure (as the step-time figure: step_plots.MAX_STEP_ROWS)
NO_GPU = "no GPU telemetry on this run"
GIB = 2**30
COLUMNS = [("experiment", "experiment"), ("util", "GPU util mean / p95 %"), ("memory", "peak GPU memory"),
           ("power_mean_w", "mean power W"), ("energy", "energy"), ("joules_per_sample", "J per sample"),
           ("throttle_s", "throttled GPU-s"), ("idle", "idle (steady)"), ("flags", "flags")]


# How a run's energy was measured (summary.json's telemetry energy_source), beside its figure.
ENERGY_HOW = {F.ENERGY_FROM_COUNTER: ", NVML energy counter", F.ENERGY_FROM_POWER: ", integral of sampled power",
              F.ENERGY_FROM_RAPL: ", RAPL"}

def node_lines(tl) -> list[tuple[tuple, Any]]:
    """((stack, run_id, experiment, repeat, node), per-sample frame) of each node's GPUs: seconds since the run's
    first sample, mean utilisation, the most memory one GPU held (GiB) and the power of all of them (W). Samples
    without a time (NaT: ``results.telemetry`` had none it could show) are not drawn."""
    gpus = tl[(tl["device"] != "cpu") & tl["t"].notna()]
    if gpus.empty:
        return []
    out = []
    for key, g in gpus.groupby(["stack", "run_id", "experiment", "repeat", "node"], sort=True, dropna=False):
        per = g.groupby("t").agg(util=("util_pct", "mean"), memory=("mem_used_bytes", "max"),
                                 power=("power_w", "sum")).sort_index()
        out.append((key, per))
    first: dict[tuple, Any] = {}
    for key, per in out:
        first[key[:4]] = min(first.get(key[:4], per.index[0]), per.index[0])
    return [(key, per.assign(seconds=(per.index - first[key[:4]]).total_seconds(), memory=per["memory"] / GIB))
            for key, per in out]


def timeline_figure(tl, df):
    """Three panels sharing the time axis: utilisation, memory and power, one line per node of each run drawn."""
    from bench.report.figures import labels, new_figure, thinned

    lines = node_lines(tl)
    if not lines:
        return None
    names = dict(zip(zip(df["stack"], df["run_id"], df["experiment"], df["repeat"]), labels(df)))
    runs = list(dict.fromkeys(key[:4] for key, _ in lines))[:MAX_RUNS_DRAWN]
    fig, axes = new_figure(3, 1, figsize=(10, 7.5), sharex=True)
    for key, per in lines:
        if key[:4] not in runs:
            continue
        name = f"{names.get(key[:4], key[2])} {key[4]}"
        x, _, _ = thinned(per["seconds"].to_numpy(), _first)
        for ax, column in zip(axes, ("util", "memory", "power")):
            _, y, _ = thinned(per[column].to_numpy(), _mean)
            ax.plot(per["seconds"].to_numpy()[x], y, label=name)
    axes[0].set(ylabel="SM utilisation %", ylim=(-2, 102), title="GPUs over the run, per node")
    axes[1].set(ylabel="memory GiB (fullest GPU)")
    axes[2].set(ylabel="power W (all GPUs)", xlabel="seconds since the run's first sample")
    axes[1].set_ylim(bottom=0)
    axes[2].set_ylim(bottom=0)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


class _Reduce:
    """numpy's ufunc ``reduceat`` shape that ``figures.thinned`` takes, for the first value or the mean of a run."""

    def __init__(self, mean: bool):
        self.mean = mean

    def reduceat(self, y, starts):
        import numpy as np

        if not self.mean:
            return y[starts]
        return np.add.reduceat(y, starts) / np.diff(np.append(starts, len(y)))


_first, _mean = _Reduce(False), _Reduce(True)


def run_rows(df, names: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """(a table row per run with GPU figures; one line per run without: "<run>: no GPU telemetry on this run")."""
    rows, lines = [], []
    for r, name in zip(df.to_dict("records"), names):
        if _missing(r.get("util_mean_pct")):
            why = r.get("telemetry_note") or "the run recorded no telemetry"
            power = "" if _missing(r.get("energy_j")) else (f"; the CPU's RAPL counters: {r['power_mean_w']:,.1f} W "
                                                            f"mean, {r['energy_j']:,.0f} J")
            lines.append(f"{name}: {why if why.startswith(NO_GPU) else f'{NO_GPU} ({why})'}{power}")
            continue
        rows.append({"experiment": name, "util": f"{r['util_mean_pct']:.1f} / {_num(r.get('util_p95_pct'), '.0f')}",
                     "memory": _memory(r), "power_mean_w": _num(r.get("power_mean_w"), ",.0f"),
                     "energy": "—" if _missing(r.get("energy_j")) else f"{r['energy_j']:,.0f} J ({r['kwh']:.4g} kWh"
                               f"{ENERGY_HOW.get(r.get('energy_source'), '')})",
                     "joules_per_sample": _num(r.get("joules_per_sample"), ".4g"),
                     "throttle_s": _num(r.get("throttle_s"), ",.0f"),
                     "idle": "—" if _missing(r.get("idle_share")) else f"{r['idle_share']:.0%}",
                     "flags": "; ".join(telemetry_flags({k: None if _missing(v) else v for k, v in r.items()}))
                     or None})
    return rows, lines


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _num(v: Any, spec: str) -> str:
    return "—" if _missing(v) else format(v, spec)


def _memory(r: dict[str, Any]) -> str:
    peak, total = r.get("memory_peak_bytes"), r.get("memory_total_bytes")
    if _missing(peak):
        return "—"
    return f"{peak / GIB:.1f} GiB" + ("" if _missing(total) else f" of {total / GIB:.0f} GiB")


def hardware_section(df, tl, *, figure: Callable[..., str], table: Callable[..., str]) -> str:
    """The section: flags first, then the figure and the table of runs with GPU telemetry, then one line per run
    without; an empty section where no run has any telemetry at all (results older than the sampler)."""
    from bench.report.figures import labels

    names = labels(df)
    rows, lines = run_rows(df, names)
    if not rows and all("no telemetry" in line for line in lines) and (tl is None or tl.empty):
        return empty_section("Hardware", "no telemetry in these results (telemetry/<node>.jsonl; launchers before "
                                         "the sampler wrote none)")
    parts = ["<h2>Hardware</h2>"]
    flagged = [f"{row['experiment']}: {row['flags']}" for row in rows if row["flags"]]
    parts += [f"<p class='flag'><b>Flag:</b> {esc(text)}</p>" for text in flagged]
    if rows:
        parts.append("<p>What the GPUs did (NVML, sampled every second on each node): SM utilisation (mean over "
                     "the node's GPUs), the fullest GPU's memory and the power of all of them. Energy is the power "
                     "integral; J per sample is the mean power over the steady throughput. Idle: the share of the "
                     "steady time's GPU samples at 0% utilisation.</p>")
        parts.append(figure(timeline_figure(tl, df) if tl is not None else None, "GPU timeline per node",
                            "No GPU samples were found."))
        parts.append(table(rows, COLUMNS))
    parts += [f"<p class='note'>{esc(line)}</p>" for line in lines]
    return "".join(parts)
