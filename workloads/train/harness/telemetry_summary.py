"""summary.json's ``telemetry`` block from the nodes' ``telemetry/<node>.jsonl`` (written by
``workloads.train.harness.telemetry``).

Pure over the lines (``summarise``), with the file reading at the edge (``summarise_files``). Each line's
``t`` weighs it by the time since the line before, so a file whose later lines are thinned out
(``telemetry.LineBudget``) still gives the run's mean and 95th percentile; energy and throttled time are the
running totals of each node's last line, exact whatever lines were left out.

    {"source": "nvml", "reason": null, "nodes": 2, "gpus": 16, "samples": 1200, "seconds": 600.2,
     "util_mean_pct": 91.4, "util_p95_pct": 100, "memory_peak_bytes": ..., "memory_total_bytes": ...,
     "power_mean_w": 9120.5, "energy_j": 5474000.1, "throttle_s": 0.0, "idle_share": 0.02}

Utilisation, memory, throttling and the idle share are the GPUs' (null on a CPU); power and energy are the GPUs',
or the CPU packages' where RAPL was read. ``energy_to_accuracy_j``: the energy at a wall time (``mark``, the
evaluation that first reached the target accuracy), each node's running total read off the line between its two
samples around it. ``idle_share``: the share of the steady window's GPU time (from the
first steady metrics line to the last line, where the launcher knows it; else the whole file) at 0% utilisation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from core.contract import summary_fields as F
from core.contract.names import TELEMETRY_DIR

MAX_FILE_BYTES = 64 * 1024 * 1024  # as the readers bound one lines file (bench.results.readers.MAX_LINES_BYTES)


class NodeFigures:
    """One node's lines, folded as they come: a 101-bin utilisation histogram, never the lines."""

    def __init__(self, window: tuple[float, float] | None = None, mark: float | None = None):
        self.window = window
        self.mark = mark if isinstance(mark, (int, float)) and not isinstance(mark, bool) else None
        self.energy_at_mark: float | None = None  # the running energy total at ``mark``, once a line reached it
        self.hist = [0.0] * 101  # GPU-seconds at each whole percent
        self.idle = self.steady = 0.0  # GPU-seconds at 0% / in all, inside the window
        self.mem_peak: int | None = None
        self.mem_total: int | None = None
        self.samples, self.first, self.last_t = 0, None, None
        self.last: dict[str, Any] = {}
        self.gpus = 0

    def add(self, line: Mapping[str, Any]) -> None:
        t = line.get("t")
        if not isinstance(t, (int, float)) or (self.last_t is not None and t < self.last_t):
            return
        dt = t - self.last_t if self.last_t is not None else 0.0
        if self.mark is not None and self.last_t is not None and self.last_t < self.mark <= t:
            before, after = line_total(self.last, "energy_j"), line_total(line, "energy_j")
            if before is not None and after is not None:
                self.energy_at_mark = before + (after - before) * (self.mark - self.last_t) / dt
        self.first = t if self.first is None else self.first
        self.last_t, self.last, self.samples = t, dict(line), self.samples + 1
        gpus = [g for g in line.get("gpus") or () if isinstance(g, dict)]
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

    def totals(self, key: str) -> float | None:
        """The sum over the last line's GPUs (or its CPU) of a running total."""
        return line_total(self.last, key)

    @property
    def seconds(self) -> float:
        return (self.last_t - self.first) if self.samples > 1 else 0.0


def line_total(line: Mapping[str, Any], key: str) -> float | None:
    """The sum over a line's GPUs (or its CPU, for energy) of a running total; None where none has it."""
    parts = [g.get(key) for g in line.get("gpus") or () if isinstance(g, dict)]
    parts += [(line.get("cpu") or {}).get(key)] if key == "energy_j" and isinstance(line.get("cpu"), dict) else []
    numbers = [v for v in parts if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(numbers) if numbers else None


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


def summarise(nodes: Mapping[str, Iterable[Mapping[str, Any]]], *, source: str | None, reason: str | None,
              window: tuple[float, float] | None = None, mark: float | None = None) -> dict[str, Any]:
    """The ``telemetry`` block of every node's lines (``{node id: lines}``); ``mark``: the wall time the energy to
    accuracy is read at (None: no evaluation reached the target)."""
    figures = []
    for lines in nodes.values():
        node = NodeFigures(window, mark)
        for line in lines:
            node.add(line)
        if node.samples:
            figures.append(node)
    hist = [sum(n.hist[i] for n in figures) for i in range(101)]
    gpu_seconds = sum(hist)
    energy = [n.totals("energy_j") for n in figures]
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
        # every node's total at the mark, or none: a sum without a node's share would understate it
        F.ENERGY_TO_ACCURACY_J: _round(sum(n.energy_at_mark for n in figures))
        if figures and all(n.energy_at_mark is not None for n in figures) else None,
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
                    window: tuple[float, float] | None = None, mark: float | None = None) -> dict[str, Any]:
    """The block of every ``telemetry/*.jsonl`` in the results folders (``dirs``: the shared one, then this node's
    fallback), each node's file once; ``own``/``source``/``reason``: this node's id and sampler."""
    files: dict[str, Path] = {}
    for d in dirs:
        for path in sorted((Path(d) / TELEMETRY_DIR).glob("*.jsonl")):
            files.setdefault(path.stem, path)
    block = summarise({node: file_lines(p) for node, p in files.items()}, source=source, reason=reason,
                      window=window, mark=mark)
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
