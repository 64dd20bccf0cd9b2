"""What the hardware did during a run: energy per result from summary.json's ``telemetry`` block, and the
timeline of each node's samples (``telemetry/<node>.jsonl``, written by ``workloads.train.harness.telemetry``).

    from bench import results
    df = results.load("results/dev")          # energy_j, joules_per_sample, kwh, util_mean_pct, ... per run
    tl = results.telemetry("results/dev")     # one row per sample and device: node, t, util_pct, power_w, ...

Each telemetry file is streamed and bounded as the rank files are (``bench.results.readers``: at most
``MAX_LINES_BYTES`` and ``MAX_LINES`` lines a file, each line checked against ``TELEMETRY_LINE``); one call keeps
at most ``MAX_TELEMETRY_ROWS`` rows, with a warning naming the file where it stopped.
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Iterable, Mapping

import bench.results.readers as R
from bench.results.files import ExperimentFiles
from bench.results.rank_lines import Split
from core.contract import summary_fields as F
from core.contract.names import SUMMARY_FILE, TELEMETRY_DIR

TELEMETRY_FILE = re.compile(re.escape(TELEMETRY_DIR) + r"/([^/]+)\.jsonl")
MAX_TELEMETRY_ROWS = 5_000_000  # rows (a sample of one device) one ``telemetry`` call keeps: ~100 bytes each
IDLE_FLAG_SHARE = 0.25  # GPUs idle (0% SM) this share of the steady time or more: the report flags the run
JOULES_PER_KWH = 3.6e6
ID_COLUMNS = ("stack", "run_id", "experiment", "repeat", "node")
SAMPLE_COLUMNS = ("t", "device", "util_pct", "mem_used_bytes", "mem_total_bytes", "power_w", "power_limit_w",
                  "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "throttled", "energy_j")
TELEMETRY_COLUMNS = ID_COLUMNS + SAMPLE_COLUMNS


def energy_figures(telemetry: Any, samples_per_s: Any, where: str = SUMMARY_FILE) -> dict[str, Any]:
    """Energy per result from a summary's ``telemetry`` block (any value: not a dict reads as none):
    ``energy_j`` (the run's, all nodes), ``kwh`` (the same in kWh), ``power_mean_w`` and ``joules_per_sample``
    (the mean power over the steady throughput, as cost per sample is the price over it), ``energy_to_accuracy_j``
    (up to the evaluation that first reached the target accuracy), and the block's
    utilisation, memory, throttle and idle figures, each None where it was not measured; ``telemetry_note``:
    why a run has no GPU figures ("no GPU telemetry on this run (...)"). An energy or a power that is a number below
    zero, or not finite, is no measurement: read as missing, with a warning naming ``where`` (the reader drops it
    first from a summary.json it read: ``readers.TELEMETRY``)."""
    t = telemetry if isinstance(telemetry, Mapping) else {}
    def pick(key: str, check: R.Check = R.number) -> Any:
        return t[key] if t.get(key) is not None and check(t[key]) else None

    dropped = [f"{k}={repr(t[k])[:40]}" for k in (F.ENERGY_J, F.POWER_MEAN_W, F.ENERGY_TO_ACCURACY_J)
               if isinstance(t.get(k), (int, float)) and not isinstance(t[k], bool) and not R.non_negative(t[k])]
    if dropped:
        warnings.warn(f"{where}: telemetry {', '.join(dropped)}: below zero or not a finite number, no measurement; "
                      "read as missing", stacklevel=2)
    energy, power = pick(F.ENERGY_J, R.non_negative), pick(F.POWER_MEAN_W, R.non_negative)
    rate = samples_per_s if R.positive(samples_per_s) else None
    return {"energy_j": energy, "kwh": round(energy / JOULES_PER_KWH, 6) if energy is not None else None,
            "power_mean_w": power,
            "joules_per_sample": round(power / rate, 6) if power is not None and rate else None,
            "energy_to_accuracy_j": pick(F.ENERGY_TO_ACCURACY_J, R.non_negative),
            "util_mean_pct": pick(F.UTIL_MEAN_PCT), "util_p95_pct": pick(F.UTIL_P95_PCT),
            "memory_peak_bytes": pick(F.MEMORY_PEAK_BYTES), "memory_total_bytes": pick(F.MEMORY_TOTAL_BYTES),
            "throttle_s": pick(F.THROTTLE_S), "idle_share": pick(F.IDLE_SHARE),
            "telemetry_note": pick(F.TELEMETRY_REASON, R.text)}


def telemetry_flags(figures: Mapping[str, Any]) -> list[str]:
    """What the report marks a run with: GPUs idle a quarter of the steady time or more, clocks throttled."""
    out = []
    idle, throttled = figures.get("idle_share"), figures.get("throttle_s")
    if isinstance(idle, (int, float)) and idle >= IDLE_FLAG_SHARE:
        out.append(f"GPUs idle {idle:.0%} of the steady time")
    if isinstance(throttled, (int, float)) and throttled > 0:
        out.append(f"GPU clocks throttled for {throttled:,.0f} GPU-seconds")
    return out


def _device(v: Any) -> bool:
    """A GPU's (or the CPU's) sample: numbers, and the names of the throttle reasons."""
    return isinstance(v, dict) and all(R.list_of(R.text)(x) if k == "throttle" else x is None or R.number(x)
                                       for k, x in v.items())


TELEMETRY_LINE: R.Schema = {"t": R.number, "gpus": R.list_of(_device), "cpu": _device}


def sample_rows(line: Mapping[str, Any]) -> Iterable[tuple]:
    """One row (SAMPLE_COLUMNS) per device of a checked line: each GPU, or the CPU packages."""
    t = line.get("t")
    if t is None:
        return
    num = lambda v: v if R.number(v) else None  # noqa: E731
    for g in line.get("gpus") or ():
        yield (t, f"gpu{g.get('index')}", num(g.get("util_pct")), num(g.get("mem_used_bytes")),
               num(g.get("mem_total_bytes")), num(g.get("power_w")), num(g.get("power_limit_w")),
               num(g.get("sm_clock_mhz")), num(g.get("mem_clock_mhz")), num(g.get("temperature_c")),
               bool(g.get("throttle")), num(g.get("energy_j")))
    cpu = line.get("cpu")
    if cpu:
        yield (t, "cpu", None, None, None, num(cpu.get("power_w")), None, None, None, None, False,
               num(cpu.get("energy_j")))


def telemetry_files(exp: ExperimentFiles) -> list[tuple[str, str]]:
    """(node, file) for each telemetry/<node>.jsonl of the experiment folder, by node."""
    return sorted((m.group(1), rel) for rel in exp.files if (m := TELEMETRY_FILE.fullmatch(rel)))


def read_samples(exp: ExperimentFiles, rows: list[tuple], budget: list[int]) -> None:
    """The experiment's telemetry files into ``rows`` (ID_COLUMNS + SAMPLE_COLUMNS), within ``budget[0]`` rows;
    one warning per file with a problem, one where the budget ran out."""
    ids = (*exp.ids, exp.repeat)
    for node, rel in telemetry_files(exp):
        lines = Split(exp.chunks(rel, R.MAX_LINES_BYTES), R.MAX_LINES_BYTES, R.MAX_LINE_BYTES)
        check, cut = R.LineCheck(TELEMETRY_LINE), False
        for count, line in enumerate(lines, 1):
            if count > R.MAX_LINES:
                cut = True
                break
            for sample in sample_rows(check.add(line) or {}):
                if budget[0] <= 0:
                    warnings.warn(f"{exp.name(rel)}: telemetry rows stop here (at most {MAX_TELEMETRY_ROWS:,} a "
                                  "call); the rest was not read", stacklevel=3)
                    return
                budget[0] -= 1
                rows.append((*ids, node, *sample))
        said = check.warning(exp.name(rel), cut=cut or lines.truncated, max_lines=R.MAX_LINES)
        if said:
            warnings.warn(said, stacklevel=3)


def frame(rows: list[tuple]) -> "pandas.DataFrame":  # noqa: F821
    """The rows as ``results.telemetry`` gives them: ``t`` as UTC times, numbers float64, ``throttled`` bool."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(TELEMETRY_COLUMNS))
    for col in SAMPLE_COLUMNS[2:-2] + ("energy_j",):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    df["throttled"] = df["throttled"].astype(bool)
    df["t"] = pd.to_datetime(pd.to_numeric(df["t"], errors="coerce"), unit="s", utc=True)
    return df.sort_values(["stack", "run_id", "experiment", "repeat", "node", "device", "t"], kind="stable",
                          ignore_index=True)
