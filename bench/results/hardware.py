"""What the hardware did during a run: energy per result from summary.json's ``telemetry`` block, and the
timeline of each node's samples (``telemetry/<node>.jsonl``, written by ``workloads.train.harness.telemetry``).

    from bench import results
    df = results.load("results/dev")          # energy_j, joules_per_sample, kwh, util_mean_pct, ... per run
    tl = results.telemetry("results/dev")     # one row per sample and device: node, t, util_pct, power_w, ...

Each telemetry file is streamed and bounded as the rank files are (``bench.results.readers``: at most
``MAX_LINES_BYTES`` and ``MAX_LINES`` lines a file, each line checked against ``TELEMETRY_LINE``); one call keeps
at most ``MAX_TELEMETRY_ROWS`` rows, as columns (``Samples``), with a warning naming the file where it stopped. A
sample's time no run can have reads as no time (NaT), and a power or energy below zero as none, each with the file's
one warning, so a hostile file neither fails the reader nor shows a negative figure.
"""

from __future__ import annotations

import re
import warnings
from array import array
from typing import Any, Mapping

import bench.results.readers as R
from bench.results.files import ExperimentFiles
from bench.results.rank_lines import Split
from bench.results.timeline import EARLIEST, LATEST
from core.contract import summary_fields as F
from core.contract.names import SUMMARY_FILE, TELEMETRY_DIR

TELEMETRY_FILE = re.compile(re.escape(TELEMETRY_DIR) + r"/([^/]+)\.jsonl")
# Rows (a sample of one device) one ``telemetry`` call keeps, and the most memory a kept row may cost at the call's
# peak: the columns as read (``Samples``, about 90 bytes a row) and, while the frame (about 145) is made from them
# column by column, about 185 in all. So a call holds at most MAX_TELEMETRY_ROWS * ROW_BYTES (400 MB) over the
# interpreter and pandas, whatever its files say; measured at this limit: 366 and 371 MB, empty and full GPU entries
# (bench.benchmarks.report_memory telemetry, BENCHMARKS.md). Each row as a tuple cost about 600 bytes. A real node's file (32 MiB at most, eight GPUs
# a line) gives about 100,000 rows.
MAX_TELEMETRY_ROWS = 2_000_000
ROW_BYTES = 200
IDLE_FLAG_SHARE = 0.25  # GPUs idle (0% SM) this share of the steady time or more: the report flags the run
JOULES_PER_KWH = 3.6e6
ID_COLUMNS = ("stack", "run_id", "experiment", "repeat", "node")
SAMPLE_COLUMNS = ("t", "device", "util_pct", "mem_used_bytes", "mem_total_bytes", "power_w", "power_limit_w",
                  "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "throttled", "energy_j")
TELEMETRY_COLUMNS = ID_COLUMNS + SAMPLE_COLUMNS
VALUE_COLUMNS = ("util_pct", "mem_used_bytes", "mem_total_bytes", "power_w", "power_limit_w", "sm_clock_mhz",
                 "mem_clock_mhz", "temperature_c", "energy_j")  # a device's numbers: float64, NaN where absent
NON_NEGATIVE = ("power_w", "power_limit_w", "energy_j")  # below zero: no measurement
MAX_GPU_INDEX = 255  # a node's GPUs are numbered from 0 (NVML's index); more would each be a name to keep
NAN = float("nan")
CPU, NO_INDEX = -1, -2  # in the device index column: the CPU packages' row, a GPU whose index was not given
PROBLEMS = {"time": "sample time(s) outside 1970-9999 (e.g. t={}): no time (NaT)",
            "index": f"GPU index(es) not a whole number from 0 to {MAX_GPU_INDEX} (e.g. {{}}): read as gpu?",
            "negative": "power or energy reading(s) below zero (e.g. {}): no measurement, read as missing"}


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
            "energy_source": pick(F.ENERGY_SOURCE, lambda v: v in F.ENERGY_SOURCES) if energy is not None else None,
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


def telemetry_files(exp: ExperimentFiles) -> list[tuple[str, str]]:
    """(node, file) for each telemetry/<node>.jsonl of the experiment folder, by node."""
    return sorted((m.group(1), rel) for rel in exp.files if (m := TELEMETRY_FILE.fullmatch(rel)))


class Samples:
    """The telemetry rows of one call as columns, an ``array`` of float64 each (``ROW_BYTES``), never a tuple or dict
    a row (those cost 600 bytes a row); at most ``limit`` rows. ``frame`` makes the DataFrame.

    A sample's time outside ``EARLIEST``..``LATEST`` (1970 to 9999, the times a run can have) is no time (NaT), a
    power or energy below zero no measurement (NaN), and a GPU index past ``MAX_GPU_INDEX`` none (``gpu?``): each
    is counted for the file's one warning (``PROBLEMS``)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit, self.rows = MAX_TELEMETRY_ROWS if limit is None else limit, 0
        self.stopped = False  # a row was left out: the limit was reached
        self.parts: list[tuple[tuple, int]] = []  # ((stack, run_id, experiment, repeat, node), its first row) per file
        self.t, self.index, self.throttled = array("d"), array("h"), array("b")  # index: a GPU's, CPU or NO_INDEX
        self.values = {c: array("d") for c in VALUE_COLUMNS}
        self.problems: dict[str, list] = {}

    def start(self, key: tuple) -> None:
        """Rows that follow are the file's of ``key`` (ID_COLUMNS); its problems are counted afresh."""
        self.parts.append((key, self.rows))
        self.problems = {}

    def add(self, line: Mapping[str, Any]) -> bool:
        """A row per device of a checked line (each GPU, then the CPU packages); False once the limit left one out."""
        t = line.get("t")
        if t is None:
            return True
        if not EARLIEST <= t <= LATEST:
            self._problem("time", t)
            t = NAN
        devices = [(g.get("index"), g) for g in line.get("gpus") or ()]
        for i, (index, g) in enumerate(devices):
            if index is not None and not (type(index) is int and 0 <= index <= MAX_GPU_INDEX):
                self._problem("index", index)
                devices[i] = (None, g)
        if line.get("cpu"):
            devices.append((CPU, line["cpu"]))
        for index, device in devices:
            if self.rows >= self.limit:
                self.stopped = True
                return False
            self.rows += 1
            self.t.append(t)
            self.index.append(NO_INDEX if index is None else index)
            self.throttled.append(bool(device.get("throttle")))
            for col, column in self.values.items():
                v = device.get(col)
                if v is not None and v < 0 and col in NON_NEGATIVE:
                    self._problem("negative", v)
                    v = None
                column.append(NAN if v is None else v)
        return True

    def _problem(self, kind: str, example: Any) -> None:
        self.problems.setdefault(kind, [0, repr(example)[:30]])[0] += 1

    def warning(self) -> str | None:
        """What the current file had wrong, in one clause (None when nothing)."""
        return "; ".join(f"{n:,} {PROBLEMS[kind].format(e)}" for kind, (n, e) in self.problems.items()) or None

    def frame(self) -> "pandas.DataFrame":  # noqa: F821
        """The rows as ``results.telemetry`` gives them (``TELEMETRY_COLUMNS``): ``t`` as UTC times, numbers
        float64, ``throttled`` bool, sorted by the ID columns, device and time. Each column is made in that order
        and its source let go as it is, so the frame costs little more than itself at its peak."""
        import numpy as np
        import pandas as pd

        sizes = np.diff([start for _, start in self.parts] + [self.rows]).astype(np.int64)
        ids = pd.DataFrame([key for key, _ in self.parts], columns=list(ID_COLUMNS))
        part_rank = ids.groupby(list(ID_COLUMNS), sort=True, dropna=False).ngroup().to_numpy()  # the same key, once
        names = np.array([_device_name(i) for i in range(NO_INDEX, MAX_GPU_INDEX + 1)], dtype=object)
        name_rank = np.argsort(np.argsort(names.astype(str), kind="stable"), kind="stable").astype(np.int16)
        codes = _numpy(self.index) - NO_INDEX  # each row's place in ``names``
        order = np.lexsort((_numpy(self.t), name_rank[codes], np.repeat(part_rank.astype(np.int32), sizes)))
        out = {"device": pd.array(names, dtype="str").take(codes[order])}  # never a str object a row
        del codes
        self.index = array("h")
        for col in SAMPLE_COLUMNS:
            if col != "device":
                out[col] = self._take(col, order)
        part = np.repeat(np.arange(len(self.parts), dtype=np.int32), sizes)[order]
        out.update({c: s.reset_index(drop=True) for c, s in ids.take(part).items()})
        return pd.DataFrame(out, columns=list(TELEMETRY_COLUMNS), copy=False)

    def _take(self, col: str, order) -> "numpy.ndarray":  # noqa: F821
        """One sample column in ``order``; its ``array`` is let go."""
        import pandas as pd

        if col == "t":
            taken, self.t = pd.to_datetime(_numpy(self.t)[order], unit="s", utc=True), array("d")
        elif col == "throttled":
            taken, self.throttled = _numpy(self.throttled)[order].astype(bool), array("b")
        else:
            taken, self.values[col] = _numpy(self.values[col])[order], array("d")
        return taken


def _numpy(a: array) -> "numpy.ndarray":  # noqa: F821
    """The array's items without a copy (an empty one as an empty ndarray of its type)."""
    import numpy as np

    kind = {"b": np.int8, "h": np.int16, "d": np.float64}[a.typecode]
    return np.frombuffer(a, dtype=kind) if len(a) else np.zeros(0, dtype=kind)


def _device_name(index: int) -> str:
    """``gpu<index>``, ``cpu`` for the CPU packages, ``gpu?`` where no index (or no index a GPU can have) was given."""
    return "cpu" if index == CPU else "gpu?" if index == NO_INDEX else f"gpu{index}"


def read_samples(exp: ExperimentFiles, samples: Samples) -> None:
    """The experiment's telemetry files into ``samples``, within its row limit; one warning per file with a
    problem (the limit reached in it among them)."""
    ids = (*exp.ids, exp.repeat)
    for node, rel in telemetry_files(exp):
        samples.start((*ids, node))
        lines = Split(exp.chunks(rel, R.MAX_LINES_BYTES), R.MAX_LINES_BYTES, R.MAX_LINE_BYTES)
        check, cut, kept = R.LineCheck(TELEMETRY_LINE), False, True
        for count, line in enumerate(lines, 1):
            if count > R.MAX_LINES:
                cut = True
                break
            if not (kept := samples.add(check.add(line) or {})):
                break
        said = check.warning(exp.name(rel), cut=cut or lines.truncated, max_lines=R.MAX_LINES)
        more = "; ".join(w for w in (samples.warning(), None if kept else
                                     f"telemetry rows stop here (at most {samples.limit:,} a call); the rest was "
                                     "not read") if w)
        if said or more:
            warnings.warn(f"{said}; {more}" if said and more else said or f"{exp.name(rel)}: {more}", stacklevel=3)
        if samples.stopped:
            return
