"""summary.json's ``telemetry`` block from the nodes' ``telemetry/<node>.jsonl`` (written by
``workloads.train.harness.telemetry``).

Pure over the lines (``summarise``), with the file reading at the edge (``summarise_files``). Each line's
``t`` weighs it by the time since the line before, so a file whose later lines are thinned out
(``telemetry.LineBudget``) still gives the run's mean and 95th percentile; energy and throttled time are each
device's running totals (``RunningTotals``), exact whatever lines were left out. A retried pod appends to its
node's file with a new sampler, whose totals start again from 0: a device's total that falls starts a new attempt,
added to what the attempts before it counted.

    {"source": "nvml", "reason": null, "nodes": 2, "gpus": 16, "samples": 1200, "seconds": 600.2,
     "util_mean_pct": 91.4, "util_p95_pct": 100, "memory_peak_bytes": ..., "memory_total_bytes": ...,
     "power_mean_w": 9120.5, "energy_j": 5474000.1, "energy_source": "nvml_energy_counter",
     "energy_to_accuracy_j": 3650100.4, "throttle_s": 0.0, "idle_share": 0.02}

Utilisation, memory, throttling and the idle share are the GPUs' (null on a CPU); power and energy are the GPUs',
or the CPU packages' where RAPL was read. ``energy_source`` names how the energy was measured, for the whole run:
NVML's energy counter where every GPU line of every node has its count (``energy_counter_j``), else the power
integral of every GPU (one GPU without the counter, or whose counter went back, and the whole run is integrated,
so one figure is one method), or RAPL on CPUs. ``power_mean_w`` is that energy over the time sampled.
``energy_to_accuracy_j``: the energy over the window the time to accuracy counts (``marks``: the trainer's start to
the evaluation that first reached the target), each node's totals at both ends read off the line between its two
samples around them. ``idle_share``: the share of the steady window's GPU time (from the first steady metrics line to
the last line, where the launcher knows it; else the whole file) at 0% utilisation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from core.contract import summary_fields as F
from core.contract.names import TELEMETRY_DIR
from workloads.train.harness.telemetry import ENERGY_COUNTER_J

MAX_FILE_BYTES = 64 * 1024 * 1024  # as the readers bound one lines file (bench.results.readers.MAX_LINES_BYTES)
ENERGY_KEYS = ("energy_j", ENERGY_COUNTER_J)  # a line's energy totals: the power integral (or RAPL), the counter's


def is_number(v: Any) -> bool:
    """A JSON number (an int or a float; not a bool, which Python counts as an int)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class RunningTotals:
    """One running total (``energy_j``, ``throttled_s``) of each device of a node (GPU by index; the CPU packages for
    energy) over its lines, across the node's attempts: a device whose total falls began again with a new sampler,
    and what it had counted stays in ``base``. A line without a device's value leaves that device's last one."""

    def __init__(self, key: str):
        self.key = key
        self.base: dict[str, float] = {}
        self.last: dict[str, float] = {}

    def add(self, gpus: list[Mapping[str, Any]], cpu: Any) -> None:
        """One line's ``gpus`` (its dicts) and ``cpu``."""
        values = [(f"gpu{g.get('index', i)}", g.get(self.key)) for i, g in enumerate(gpus)]
        if self.key == "energy_j" and isinstance(cpu, dict):
            values.append(("cpu", cpu.get(self.key)))
        for device, v in values:
            if not is_number(v) or v < 0:
                continue
            if device in self.last and v < self.last[device]:  # a new attempt's sampler: its totals start from 0
                self.base[device] = self.base.get(device, 0.0) + self.last[device]
            self.last[device] = v

    def total(self) -> float | None:
        """Every device's count so far, all attempts; None where no line had one."""
        return sum(self.base.get(d, 0.0) + v for d, v in self.last.items()) if self.last else None


class NodeFigures:
    """One node's lines, folded as they come: a 101-bin utilisation histogram, never the lines."""

    def __init__(self, window: tuple[float, float] | None = None, marks: Sequence[float | None] = ()):
        self.window = window
        self.running = {key: RunningTotals(key) for key in (*ENERGY_KEYS, "throttled_s")}
        self.marks = [m if is_number(m) else None for m in marks]
        # each energy total at each mark, once reached
        self.energy_at: dict[str, list[float | None]] = {key: [None] * len(self.marks) for key in ENERGY_KEYS}
        self.uncounted = False  # a GPU line without the counter's count: the node's energy is the power integral
        self.hist = [0.0] * 101  # GPU-seconds at each whole percent
        self.idle = self.steady = 0.0  # GPU-seconds at 0% / in all, inside the window
        self.mem_peak: int | None = None
        self.mem_total: int | None = None
        self.samples, self.first, self.last_t = 0, None, None
        self.gpus = 0

    def add(self, line: Mapping[str, Any]) -> None:
        t = line.get("t")
        if not isinstance(t, (int, float)) or (self.last_t is not None and t < self.last_t):
            return
        dt = t - self.last_t if self.last_t is not None else 0.0
        gpus = [g for g in line.get("gpus") or () if isinstance(g, dict)]
        before = {key: self.running[key].total() for key in ENERGY_KEYS}
        for running in self.running.values():
            running.add(gpus, line.get("cpu"))
        for key in ENERGY_KEYS:
            self._read_marks(self.energy_at[key], t, dt, before[key], self.running[key].total())
        self.uncounted |= any(not is_number(g.get(ENERGY_COUNTER_J)) or g[ENERGY_COUNTER_J] < 0 for g in gpus)
        self.first = t if self.first is None else self.first
        self.last_t, self.samples = t, self.samples + 1
        self.gpus = max(self.gpus, len(gpus))
        steady = self.window is None or self.window[0] <= t <= self.window[1]
        for g in gpus:
            self._gpu(g, dt, steady)

    def _gpu(self, g: Mapping[str, Any], dt: float, steady: bool) -> None:
        used, total, util = g.get("mem_used_bytes"), g.get("mem_total_bytes"), g.get("util_pct")
        if isinstance(used, int) and (self.mem_peak is None or used > self.mem_peak):
            self.mem_peak, self.mem_total = used, total if isinstance(total, int) else None
        if isinstance(util, (int, float)) and 0 <= util <= 100:
            self.hist[int(util)] += dt
            if steady:
                self.steady += dt
                self.idle += dt if util == 0 else 0.0

    def _read_marks(self, energy_at: list[float | None], t: float, dt: float, before: float | None,
                    after: float | None) -> None:
        """One energy total at each mark this line reaches (into ``energy_at``): between the line before
        (``before``, ``dt`` seconds ago) and this one (``after``); a mark at the first line's time is that line's."""
        for i, mark in enumerate(self.marks):
            if mark is None or energy_at[i] is not None or after is None:
                continue
            if self.last_t is None:
                energy_at[i] = after if mark == t else None
            elif self.last_t < mark <= t and before is not None:
                energy_at[i] = before + (after - before) * (mark - self.last_t) / dt

    def totals(self, key: str) -> float | None:
        """A running total (``energy_j``, ``energy_counter_j``, ``throttled_s``) of every device, all attempts."""
        return self.running[key].total()

    def between_marks(self, key: str) -> float | None:
        """One energy total (``ENERGY_KEYS``) from the first mark to the last; None where a mark fell outside the
        lines."""
        energy_at = self.energy_at[key]
        if len(energy_at) < 2 or any(e is None for e in energy_at):
            return None
        return energy_at[-1] - energy_at[0]

    @property
    def seconds(self) -> float:
        return (self.last_t - self.first) if self.samples > 1 else 0.0


def percentile(hist: Sequence[float], q: float) -> int | None:
    """The smallest whole percent at or below which ``q`` of the weight lies."""
    whole = sum(hist)
    if whole <= 0:
        return None
    running = 0.0
    for pct, weight in enumerate(hist):
        running += weight
        if running >= q * whole:
            return pct
    return len(hist) - 1


def _round(value: float | None, digits: int = 3) -> float | None:
    return round(value, digits) if value is not None else None


def energy_method(figures: Sequence[NodeFigures]) -> tuple[str | None, Any]:
    """(the run's ``energy_source``, each node's energy total to read): NVML's counter where every GPU line of
    every node has its count; else the power integral where the run had GPUs, or RAPL (a node without GPUs reads
    its CPU packages' energy, ``energy_j``, whatever the GPUs' method); None where nothing measured energy."""
    gpu_nodes = [n for n in figures if n.gpus]
    counted = bool(gpu_nodes) and not any(n.uncounted for n in gpu_nodes)
    key = lambda n: ENERGY_COUNTER_J if counted and n.gpus else "energy_j"  # noqa: E731
    if counted:
        return F.ENERGY_FROM_COUNTER, key
    if gpu_nodes:
        return F.ENERGY_FROM_POWER, key
    return (F.ENERGY_FROM_RAPL if any(n.totals("energy_j") is not None for n in figures) else None), key


def summarise(nodes: Mapping[str, Iterable[Mapping[str, Any]]], *, source: str | None, reason: str | None,
              window: tuple[float, float] | None = None,
              to_accuracy: tuple[float, float] | None = None) -> dict[str, Any]:
    """The ``telemetry`` block of every node's lines (``{node id: lines}``); ``to_accuracy``: the wall times the
    energy to accuracy runs between (the trainer's start, the evaluation that first reached the target; None: no
    evaluation reached it)."""
    figures = []
    for lines in nodes.values():
        node = NodeFigures(window, to_accuracy or ())
        for line in lines:
            node.add(line)
        if node.samples:
            figures.append(node)
    hist = [sum(n.hist[i] for n in figures) for i in range(101)]
    gpu_seconds = sum(hist)
    method, key = energy_method(figures)
    energy = [n.totals(key(n)) for n in figures]
    between = [n.between_marks(key(n)) for n in figures]
    power = [e / n.seconds for e, n in zip(energy, figures) if e is not None and n.seconds > 0]
    peak = max((n for n in figures if n.mem_peak is not None), key=lambda n: n.mem_peak, default=None)
    steady = sum(n.steady for n in figures)
    throttled = [n.totals("throttled_s") for n in figures if n.gpus]
    return {
        F.TELEMETRY_SOURCE: source if figures else None, F.TELEMETRY_REASON: reason,
        "nodes": len(figures), "gpus": sum(n.gpus for n in figures), "samples": sum(n.samples for n in figures),
        "seconds": _round(max((n.seconds for n in figures), default=None)),
        F.UTIL_MEAN_PCT: _round(sum(p * w for p, w in enumerate(hist)) / gpu_seconds, 2) if gpu_seconds else None,
        F.UTIL_P95_PCT: percentile(hist, 0.95),
        F.MEMORY_PEAK_BYTES: peak.mem_peak if peak else None, F.MEMORY_TOTAL_BYTES: peak.mem_total if peak else None,
        F.POWER_MEAN_W: _round(sum(power)) if power else None,
        F.ENERGY_J: _round(sum(e for e in energy if e is not None)) if any(e is not None for e in energy) else None,
        F.ENERGY_SOURCE: method,
        # every node's share, or none: a sum without a node's share would understate it
        F.ENERGY_TO_ACCURACY_J: _round(sum(between)) if figures and all(e is not None for e in between) else None,
        F.THROTTLE_S: _round(sum(v for v in throttled if v is not None)) if throttled else None,
        F.IDLE_SHARE: round(sum(n.idle for n in figures) / steady, 4) if steady > 0 else None,
    }


def file_lines(path: Path, max_bytes: int = MAX_FILE_BYTES) -> Iterable[dict[str, Any]]:
    """The JSON object lines of one file, read as a stream up to ``max_bytes``; a malformed line (the last, cut
    by a writer that was stopped) is skipped."""
    read = 0
    try:
        with open(path, "rb") as f:
            for raw in f:
                read += len(raw)
                if read > max_bytes:
                    return
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict):
                    yield line
    except OSError:
        return


def summarise_files(dirs: Sequence[Path], *, own: str, source: str | None, reason: str | None,
                    window: tuple[float, float] | None = None,
                    to_accuracy: tuple[float, float] | None = None) -> dict[str, Any]:
    """The block of every ``telemetry/*.jsonl`` in the results folders (``dirs``: the shared one, then this node's
    fallback), each node's file once; ``own``/``source``/``reason``: this node's id and sampler."""
    files: dict[str, Path] = {}
    for d in dirs:
        for path in sorted((Path(d) / TELEMETRY_DIR).glob("*.jsonl")):
            files.setdefault(path.stem, path)
    block = summarise({node: file_lines(p) for node, p in files.items()}, source=source, reason=reason,
                      window=window, to_accuracy=to_accuracy)
    if block["nodes"] and block[F.TELEMETRY_SOURCE] is None:
        block[F.TELEMETRY_SOURCE] = "nvml" if block["gpus"] else "rapl"  # other nodes' files: this node had none
    if own not in files and reason is None:
        block[F.TELEMETRY_REASON] = f"no {TELEMETRY_DIR} file for {own}"
    return block


def steady_window(by_rank: Mapping[int, Sequence[Mapping[str, Any]]]) -> tuple[float, float] | None:
    """From the first steady (non-warm-up) metrics line's start to the last line's end, on the wall clock, over all
    ranks; None where the lines carry no wall times."""
    starts, ends = [], []
    for lines in by_rank.values():
        for r in lines:
            wall = r.get("wall_time")
            if not isinstance(wall, (int, float)):
                continue
            ends.append(wall)
            if not r.get("warmup"):
                starts.append(wall - (r.get("step_time_s") or 0))
    return (min(starts), max(ends)) if starts and ends else None
