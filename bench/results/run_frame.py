"""The rows of experiment runs as the frame ``results.load`` gives: its columns (``COLUMNS`` then ``EXTRA``) and
their dtypes. Measures (``MEASURES``) are float64, NaN where missing; counts (``COUNTS``) int64 when every row has
a whole number, else float64 with NaN; times (``TIMES``) UTC datetimes. A value of the wrong type reads as
missing, with one warning per column. Pure: the rows come from ``bench.results.run_row``."""

from __future__ import annotations

import warnings
from typing import Any

import bench.results.language_model as LM
from bench.results.timeline import parse_iso

COLUMNS = ("stack", "run_id", "experiment", "repeat", "workload", "framework", "status", "instance_type", "gpu", "nodes",
           "gpus_per_node", "world_size", "batch_size", "precision", "samples_per_s", "samples_per_s_per_gpu",
           "step_time_p50_s", "step_time_p95_s", "mfu", "wall_s", "cost_usd", "accuracy", "time_to_accuracy_s",
           "restarts", "results_uri", "error")
EXTRA = ("hourly_usd", "usd_per_1k_samples", "region", "prices", "tflops_per_s", "flops_per_sample", "loop_seconds",
         "data_wait_s", "data_wait_share",
         "started_at", "image", "git_commit", "device", "config", "command", "busbw", "fabric", "flags",
         "what_ran", "what_ran_unknown",
         "startup", "samples_per_epoch",
         # what the hardware did (summary.json's telemetry block; bench.results.hardware.energy_figures)
         "energy_j", "kwh", "energy_source", "power_mean_w", "joules_per_sample", "energy_to_accuracy_j",
         "util_mean_pct", "util_p95_pct", "memory_peak_bytes", "memory_total_bytes", "throttle_s", "idle_share", "telemetry_note",
         # a language model's (summary.json's language_model block; bench.results.language_model), None for others
         *LM.COLUMNS)
# The frame's dtypes (module docstring): measures float64; counts int64 when complete, else float64; times UTC.
MEASURES = ("samples_per_s", "samples_per_s_per_gpu", "step_time_p50_s", "step_time_p95_s", "mfu", "wall_s",
            "cost_usd", "accuracy", "time_to_accuracy_s", "hourly_usd", "usd_per_1k_samples", "tflops_per_s",
            "flops_per_sample", "loop_seconds", "data_wait_s", "data_wait_share", "energy_j", "kwh", "power_mean_w",
            "joules_per_sample", "energy_to_accuracy_j", "util_mean_pct", "util_p95_pct", "memory_peak_bytes",
            "memory_total_bytes", "throttle_s", "idle_share", *LM.MEASURES)
COUNTS = ("repeat", "nodes", "gpus_per_node", "world_size", "batch_size", "restarts", "samples_per_epoch", *LM.COUNTS)
TIMES = ("started_at",)


def frame(rows: list[dict[str, Any]]) -> "pandas.DataFrame":  # noqa: F821
    """The rows as ``load`` gives them: every column with its dtype, sorted by stack, run and experiment."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(COLUMNS + EXTRA))
    for col in MEASURES + COUNTS:
        values = _floats(df[col].tolist(), col)
        whole = all(v == v and v.is_integer() and abs(v) < 2 ** 63 for v in values)
        df[col] = pd.Series(values, dtype="float64").astype("int64" if col in COUNTS and whole else "float64")
    for col in TIMES:
        values = _floats([parse_iso(v) if v is not None else None for v in df[col].tolist()], col,
                         given=df[col].tolist())
        df[col] = pd.to_datetime(pd.Series(values, dtype="float64"), unit="s", utc=True).dt.round("us")
    return df.sort_values(["stack", "run_id", "experiment", "repeat"], kind="stable", ignore_index=True)


def _floats(values: list[Any], column: str, given: list[Any] | None = None) -> list[float]:
    """The values as floats, NaN for missing; one warning per column for values that are not numbers (or
    times: ``given`` are the values as read, where ``values`` are their parse)."""
    out, bad = [], []
    for i, v in enumerate(values):
        was = v if given is None else given[i]
        try:
            number = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        except OverflowError:  # an integer past a float's range
            number = None
        if number is None and was is not None and not (isinstance(was, float) and was != was):
            bad.append(was)
        out.append(float("nan") if number is None else number)
    if bad:
        warnings.warn(f"{column}: {len(bad)} value(s) not a {'time' if given is not None else 'number'} "
                      f"(e.g. {str(bad[0])[:40]!r}); read as missing", stacklevel=3)
    return out
