"""Experiment runs' metrics lines as the frame ``results.steps`` gives: one row per line, in rank order, with
the dtypes pandas gave the lines as dicts, made from the columns with one copy. Pure: the lines are read by
``bench.results.rank_lines``."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import bench.results.rank_lines as rank_lines
from bench.results.rank_lines import RankLines

STEP_COLUMNS = ("stack", "run_id", "experiment", "repeat", "rank", "step", "loss", "step_time_s", "samples_per_s", "warmup",
                "restart", "world_size", "wall_time", "steps")  # step_time_s: the line's interval of ``steps`` steps
Part = tuple[tuple[str | None, str | None, str | None], int, RankLines]  # (stack, run_id, experiment), repeat, lines


def step_frame(parts: Iterable[Part]) -> "pandas.DataFrame":  # noqa: F821
    """The metrics lines of experiment runs as ``steps`` gives them: one row per line, in rank order, each column
    of the dtype pandas gave the lines as dicts (integers int64, or float64 with NaN where some line lacks one;
    warmup bool, or object with None), made from the columns with one copy."""
    import numpy as np
    import pandas as pd

    parts = [(ids, repeat, lines.step_columns(), lines.whole) for ids, repeat, lines in parts if lines.lines]
    if not parts:
        return pd.DataFrame(columns=list(STEP_COLUMNS))
    sizes = [len(cols["step"]) for _, _, cols, _ in parts]
    out = {name: np.repeat(np.array([ids[i] for ids, _, _, _ in parts], dtype=object), sizes)
           for i, name in enumerate(STEP_COLUMNS[:3])}
    out["repeat"] = np.repeat(np.array([repeat for _, repeat, _, _ in parts], dtype=np.int64), sizes)
    for name in STEP_COLUMNS[4:]:
        col = np.concatenate([cols[name] for _, _, cols, _ in parts])
        out[name] = _step_dtype(name, col, all(whole.get(name, False) for _, _, _, whole in parts))
    return pd.DataFrame(out, columns=list(STEP_COLUMNS), copy=False)


def _step_dtype(name: str, col, whole: bool):
    """A step column as pandas infers it from the lines' values (``RankLines.step_columns``); ``whole``: every
    value of a float column was an int."""
    import numpy as np

    if name in rank_lines.INTS:
        absent = col == rank_lines.MISSING
        return np.where(absent, np.nan, col.astype(np.float64)) if absent.any() else col
    if name in rank_lines.FLOATS:
        return col.astype(np.int64) if whole and not np.isnan(col).any() else col
    if name == "warmup":
        if (col < 0).any():
            return np.array([None, False, True], dtype=object)[col + 1]
        return col.astype(bool)
    return col


def step_rows(by_rank: Mapping[int, list[dict[str, Any]]], ids: tuple[str | None, ...],
              repeat: int = 1) -> list[dict[str, Any]]:
    """The rows of ``step_frame`` for one experiment run's lines, as dicts."""
    return step_frame([(tuple(ids), repeat, RankLines.of(by_rank))]).to_dict("records")
