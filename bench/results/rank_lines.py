"""An experiment run's metrics lines as columns, read once, line by line, within bounds checked as each line is read.

``read(exp, budget)`` streams each ``metrics/rank-N.jsonl`` of an experiment folder in pieces
(``files.CHUNK_BYTES``), splits them into lines, checks each line by the reader's rules (``readers.RANK_LINE``
through ``readers.LineCheck``) and appends its fields to typed columns: ``array.array`` while reading, numpy
arrays after. A line longer than ``MAX_LINE_BYTES`` is skipped as malformed without being parsed; a file stops at
``MAX_LINES`` lines or ``MAX_LINES_BYTES``; and every file of one call stops when the call's ``Budget``
(``MAX_STEP_ROWS`` lines, ``MAX_STEP_TIMES`` step times) is spent, so what a call holds is bounded whatever the
files say: about 90 bytes a line and 8 a step time (each line as a dict took about 3 KB).

``RankLines`` is what ``results.runs`` gives beside each row: a read-only mapping ``{rank: lines}`` whose lines
are dicts made when asked for, with the fields ``readers.read_rank_lines`` keeps and bench reads (the schema's),
and the statistics the rows, ``compare`` and the report take from the lines, computed on the columns over every
line read (the same figures the dicts gave).
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Iterator, Mapping, Sequence

import bench.results.readers as R
from bench.results.files import ExperimentFiles
from core.contract.names import METRICS_DIR
from workloads.train.harness.summary import sorted_quantile

RANK_FILE = re.compile(re.escape(METRICS_DIR) + r"/rank-(\d+)\.jsonl")
INTS = ("step", "restart", "world_size", "samples", "steps")  # readers.integer: within +-1e15, so int64 holds them
FLOATS = ("loss", "step_time_s", "samples_per_s", "wall_time")  # NaN where absent (a reader never keeps a NaN)
MISSING = -(2 ** 63)  # an absent integer (outside +-MAX_NUMBER)
NO_TIMES = -1  # a line without step_times_s (0: an empty list)


@dataclass
class Budget:
    """What one call may still read: metrics lines and step times. Spent, every later file of the call is left."""

    lines: int = field(default_factory=lambda: R.MAX_STEP_ROWS)
    step_times: int = field(default_factory=lambda: R.MAX_STEP_TIMES)
    stopped_in: str | None = None  # the file where it ran out
    runs_left: int = 0  # experiment runs with metrics not read at all

    def __post_init__(self) -> None:
        self.limits = (self.lines, self.step_times)

    def take(self, step_times: int) -> bool:
        """Whether one more line, with ``step_times`` step times, may be kept (it is then counted)."""
        if self.lines < 1 or step_times > self.step_times:
            self.lines = 0
            return False
        self.lines -= 1
        self.step_times -= step_times
        return True

    def warning(self, where: str) -> str | None:
        if self.stopped_in is None:
            return None
        left = f"; the metrics of {self.runs_left} later experiment run(s) were not read" if self.runs_left else ""
        return (f"{where}: metrics read up to the most one read keeps ({self.limits[0]:,} lines, "
                f"{self.limits[1]:,} step times): stopped in {self.stopped_in}{left}")


class Columns:
    """The lines being read, field by field (``array.array``: 8 bytes a number, no Python object per value)."""

    def __init__(self, times: bool = True) -> None:
        self.keep_times = times  # False: step_times_s is left out (results.steps draws no step times)
        self.ints = {k: array("q") for k in INTS}
        self.floats = {k: array("d") for k in FLOATS}
        self.whole = dict.fromkeys(FLOATS, True)  # every value so far an int (pandas then infers int64)
        self.warmup = array("b")  # -1 absent, 0, 1
        self.counts = array("q")  # step times of each line; NO_TIMES absent
        self.times = array("d")
        self.segments: list[tuple[int, int, int]] = []  # (rank, first line, end)

    def __len__(self) -> int:
        return len(self.warmup)

    def add(self, doc: Mapping[str, Any]) -> None:
        """One line's fields, as a reader kept them (each of its type, or absent)."""
        for k, col in self.ints.items():
            v = doc.get(k)
            col.append(MISSING if v is None else v)
        for k, col in self.floats.items():
            v = doc.get(k)
            col.append(float("nan") if v is None else v)
            if self.whole[k] and v is not None and type(v) is not int:
                self.whole[k] = False
        w = doc.get("warmup")
        self.warmup.append(-1 if w is None else int(w))
        times = doc.get("step_times_s") if self.keep_times else None
        self.counts.append(NO_TIMES if times is None else len(times))
        if times:
            self.times.extend(times)

    def rank(self, rank: int, start: int) -> None:
        self.segments.append((rank, start, len(self)))

    def done(self) -> "RankLines":
        import numpy as np

        return RankLines({k: np.frombuffer(c, dtype=np.int64) for k, c in self.ints.items()},
                         {k: np.frombuffer(c, dtype=np.float64) for k, c in self.floats.items()},
                         np.frombuffer(self.warmup, dtype=np.int8), np.frombuffer(self.counts, dtype=np.int64),
                         np.frombuffer(self.times, dtype=np.float64), self.segments, dict(self.whole))


class RankLines(Mapping):
    """One experiment run's metrics lines by rank (``Columns.done``); see the module docstring."""

    def __init__(self, ints, floats, warmup, counts, times, segments, whole) -> None:
        self.ints, self.floats, self.warmup, self.counts, self.times = ints, floats, warmup, counts, times
        self.segments, self.whole = segments, whole
        self._by_rank = {rank: (start, end) for rank, start, end in segments}

    @cached_property
    def offsets(self):
        """Where each line's step times start in ``times`` (and, last, where they end)."""
        import numpy as np

        return np.concatenate(([0], np.cumsum(np.maximum(self.counts, 0))))

    @classmethod
    def of(cls, by_rank: Mapping[int, Iterable[Mapping[str, Any]]]) -> "RankLines":
        """``by_rank`` as it is (a RankLines), or its lines (dicts, each checked by the reader's rules) as one."""
        if isinstance(by_rank, RankLines):
            return by_rank
        cols = Columns()
        for rank, lines in (by_rank or {}).items():
            start = len(cols)
            for line in lines:
                cols.add({k: v for k, v in R.checked(line, R.RANK_LINE)[0].items() if v is not None})
            cols.rank(rank, start)
        return cols.done()

    # ---- the mapping: {rank: lines as dicts} -------------------------------------------------------------------

    def __getitem__(self, rank: int) -> "Lines":
        start, end = self._by_rank[rank]
        return Lines(self, start, end)

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_rank)

    def __len__(self) -> int:
        return len(self._by_rank)

    @property
    def lines(self) -> int:
        return len(self.warmup)

    def line(self, i: int) -> dict[str, Any]:
        """Line ``i`` (of all ranks, in order) as the reader's dict."""
        out: dict[str, Any] = {k: int(c[i]) for k, c in self.ints.items() if c[i] != MISSING}
        out.update({k: float(c[i]) for k, c in self.floats.items() if c[i] == c[i]})
        if self.warmup[i] >= 0:
            out["warmup"] = bool(self.warmup[i])
        if self.counts[i] != NO_TIMES:
            out["step_times_s"] = self.times[self.offsets[i]:self.offsets[i + 1]].tolist()
        return out

    # ---- what rows, compare and the report take from the lines -------------------------------------------------

    def _int(self, name: str, absent: int):
        import numpy as np

        col = self.ints[name]
        return np.where(col == MISSING, absent, col)

    @cached_property
    def steady_step_times(self):
        """Each steady (non-warm-up) step's time, the slowest rank's (a synchronous step ends with it), in (restart,
        step) order, as a numpy array; a line without a step or restart counts as step 0 or restart 0."""
        import numpy as np

        t = self.floats["step_time_s"]
        ok = (self.warmup != 1) & ~np.isnan(t)
        return _max_by_key(self._int("restart", 0)[ok], self._int("step", 0)[ok], t[ok])

    def steady_quantile(self, q: float) -> float | None:
        return sorted_quantile(_sorted(self.steady_step_times), q)

    def step_samples(self) -> tuple[list[float], float | None]:
        """(each steady step's time, the slowest rank's, in order; global samples per step): see
        ``bench.results.compare.step_samples``."""
        import numpy as np

        t = self.floats["step_time_s"]
        idx = np.flatnonzero((self.warmup != 1) & (self.ints["step"] != MISSING) & ~np.isnan(t))
        n = np.maximum(self._int("steps", 1)[idx], 1)
        counts = self.counts[idx]
        per_line = np.where(counts > 0, counts, 1)  # a line without step times gives one: its time over its steps
        within = np.arange(int(per_line.sum())) - np.repeat(np.cumsum(per_line) - per_line, per_line)
        values = np.repeat(t[idx] / n, per_line)
        listed = np.repeat(counts > 0, per_line)
        values[listed] = self.times[(np.repeat(self.offsets[idx], per_line) + within)[listed]]
        restart, step = self._int("restart", 0)[idx], self.ints["step"][idx]
        times = _max_by_key(np.repeat(restart, per_line), np.repeat(step - per_line + 1, per_line) + within, values)
        samples = _exact_sum(self._int("samples", 0)[idx])
        steps = _exact_sum(_max_by_key(restart, step, n))
        return times[times > 0].tolist(), samples / steps if steps and samples else None

    def world_sizes(self) -> list[int]:
        import numpy as np

        col = self.ints["world_size"]
        return [int(v) for v in np.unique(col[col != MISSING])]

    def most_restarts(self) -> int:
        return int(self._int("restart", 0).max()) if self.lines else 0

    def step_columns(self) -> dict[str, Any]:
        """The per-line columns of ``results.steps`` (rank and STEP_COLUMNS[5:]), numbers as read: integers with
        MISSING, floats with NaN, warm-up -1/0/1; ``step_frame.step_frame`` gives them their frame's dtypes."""
        import numpy as np

        big = any(not -2 ** 63 < rank < 2 ** 63 for rank, _, _ in self.segments)  # a file named rank-<30 digits>
        ranks = np.array([rank for rank, _, _ in self.segments], dtype=object if big else np.int64)
        out = {"rank": np.repeat(ranks, [end - start for _, start, end in self.segments])}
        return out | {"step": self.ints["step"], "loss": self.floats["loss"],
                      "step_time_s": self.floats["step_time_s"], "samples_per_s": self.floats["samples_per_s"],
                      "warmup": self.warmup, "restart": self.ints["restart"],
                      "world_size": self.ints["world_size"], "wall_time": self.floats["wall_time"],
                      "steps": self.ints["steps"]}


class Lines(Sequence):
    """One rank's lines of a RankLines, each a dict made when asked for."""

    def __init__(self, of: RankLines, start: int, end: int) -> None:
        self._of, self._start, self._end = of, start, end

    def __len__(self) -> int:
        return self._end - self._start

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self._of.line(self._start + (i % len(self)))


def _sorted(values):
    import numpy as np

    return np.sort(values)


def _max_by_key(first, second, values):
    """The largest of ``values`` for each (first, second) key, in key order (numpy arrays)."""
    import numpy as np

    if not len(values):
        return np.asarray(values, dtype=np.float64)
    order = np.lexsort((second, first))
    first, second, values = first[order], second[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], (first[1:] != first[:-1]) | (second[1:] != second[:-1]))))
    return np.maximum.reduceat(values, starts)


def _exact_sum(values) -> int:
    """The sum of integers (int64) as a Python int, exact where int64 would overflow (hostile counts near 1e15)."""
    if not len(values):
        return 0
    if int(abs(values).max()) * len(values) < 2 ** 62:
        return int(values.sum())
    return sum(int(v) for v in values.tolist())


# ---- reading ---------------------------------------------------------------------------------------------------

class Split:
    """The lines of a stream of byte pieces (``ExperimentFiles.chunks``), decoded, within its first ``limit`` bytes;
    a line over ``max_line`` bytes is given as None, never joined (``truncated``: the stream held more)."""

    def __init__(self, chunks: Iterable[bytes], limit: int, max_line: int) -> None:
        self.chunks, self.limit, self.max_line = chunks, limit, max_line
        self.truncated = False
        self.opened = False  # a first piece came (an empty file gives one)

    def __iter__(self) -> Iterator[str | None]:
        held, seen, over = b"", 0, False
        for chunk in self.chunks:
            self.opened = True
            if seen + len(chunk) > self.limit:
                chunk, self.truncated = chunk[:self.limit - seen], True
            seen += len(chunk)
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                piece = chunk[start:end]
                yield None if over or len(held) + len(piece) > self.max_line else (held + piece).decode(
                    "utf-8", "replace")
                held, over, start = b"", False, end + 1
            rest = chunk[start:]
            over = over or len(held) + len(rest) > self.max_line
            held = b"" if over else held + rest
            if self.truncated:
                break
        if over or held:
            yield None if over else held.decode("utf-8", "replace")


def read_file(lines: Iterable[str | None], cols: Columns, budget: Budget, name: str) -> str | None:
    """A rank file's lines into ``cols`` (at most MAX_LINES, within ``budget``); its warning, None if none."""
    check = R.LineCheck(R.RANK_LINE)
    pieces = iter(lines)
    cut = False
    for count, line in enumerate(pieces, 1):
        if count > R.MAX_LINES:  # the rest counts as cut when it holds more than blanks
            cut = line is None or bool(line.strip()) or any(x is None or x.strip() for x in pieces)
            break
        doc = check.add(line)
        if doc is None:
            continue
        if not budget.take(len(doc.get("step_times_s") or ()) if cols.keep_times else 0):
            budget.stopped_in = name
            break
        cols.add(doc)
    return check.warning(name, cut=cut or getattr(lines, "truncated", False), max_lines=R.MAX_LINES)


def rank_files(exp: ExperimentFiles) -> list[tuple[int, str]]:
    """(rank, file) for each metrics/rank-N.jsonl, by rank; a second file of one rank (rank-01 beside rank-1) is
    left out."""
    found: dict[int, str] = {}
    for rel in sorted(exp.files):
        m = RANK_FILE.fullmatch(rel)
        if m:
            found.setdefault(int(m.group(1)), rel)
    return sorted(found.items())


def read(exp: ExperimentFiles, budget: Budget, *, times: bool = True) -> RankLines:
    """Every rank file of the experiment folder, streamed (module docstring); one warning per file with a problem.
    ``times``: keep each line's step times (``compare`` needs them, the step frame does not)."""
    import warnings

    cols = Columns(times)
    files = rank_files(exp)
    if files and budget.stopped_in is not None:
        budget.runs_left += 1
    for rank, rel in files if budget.stopped_in is None else ():
        start = len(cols)
        lines = Split(exp.chunks(rel, R.MAX_LINES_BYTES), R.MAX_LINES_BYTES, R.MAX_LINE_BYTES)
        said = read_file(lines, cols, budget, exp.name(rel))
        if lines.opened:
            cols.rank(rank, start)
        if said:
            warnings.warn(said, stacklevel=3)
        if budget.stopped_in is not None:
            break
    return cols.done()
