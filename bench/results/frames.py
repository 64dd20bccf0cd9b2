"""Benchmark results as pandas DataFrames: ``load`` (one row per experiment run), ``steps`` and ``repeats``.

    from bench import results
    df = results.load("results/dev")                 # a stack, a run or one experiment
    df = results.load("dev/20261127-091239")         # a run handle, from any folder (bench.results.sources)
    df = results.load("s3://bucket/dev/run-001")     # the same from the results bucket
    curves = results.steps("results/dev")            # per-rank, per-step lines
    stats = results.repeats(df)                      # per experiment: runs, mean samples/s, 95% interval
    hw = results.telemetry("results/dev")            # per node and device: utilisation, memory, power over time

A source is read at any level: the experiment folders are found by their ``summary.json``
(or, for a run that died before writing one, by its ``metrics/`` or ``logs/``), and
stack/run_id/experiment are the last three names of ``<source>/<relative path>``. A source
that does not exist (a missing folder, an ``s3://`` prefix with no objects, a bucket that is not
there) raises ``NoResults``, a ``FileNotFoundError`` naming it; an existing folder with no
experiment in it gives an empty frame (every column) and a warning. Files that are missing or
malformed give a ``warnings.warn`` naming them, never a traceback; a failed run is a row with its
status and root cause.

Dtypes (``load``): ``started_at`` is ``datetime64[ns, UTC]`` (NaT where unknown). Measures
(``MEASURES``: samples/s, step times, mfu, wall_s, cost_usd, hourly_usd, accuracy, a language model's tokens/s and
dollars and energy per billion tokens, ...) are always float64, NaN where missing. Counts (``COUNTS``: repeat,
nodes, gpus_per_node, world_size, batch_size, restarts, samples_per_epoch, a language model's parameters and
shape) are int64 when every row has a whole number, else float64 with NaN (pandas' own rule for a missing int).
A value of the wrong type in a summary reads as missing, with a warning. Text columns stay strings; device, config,
command, busbw, what_ran, startup and a language model's val_losses hold the summary's dicts and lists (object).

Repeats: an experiment with ``repeats: N`` has one row per run, ``repeat`` = 1..N (its folder
``<experiment>/repeat_<k>/``); an experiment run without repeats has one row with ``repeat`` 1. So
the rows of one (stack, run_id, experiment) are its repeats, and ``repeats`` summarizes them. The
reading (local or S3) is in ``bench.results.files``, the finding of the experiment folders in
``bench.results.experiment_folders``; turning documents into rows is pure (``bench.results.run_row``,
``bench.results.run_frame``, ``bench.results.step_frame``). This module is the entry that reads and joins them.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Iterator

import bench.results.readers as R
import bench.results.rank_lines as rank_lines
from bench.results.experiment_folders import NoResults, UnreadableResults, experiments
from bench.results.files import ExperimentFiles
from bench.results.rank_lines import Budget, RankLines
from bench.results.run_frame import COLUMNS, frame
from bench.results.run_row import row
from bench.results.step_frame import STEP_COLUMNS, step_frame
from core.contract import summary_fields as F
from core.contract.names import EVAL_DIR, EVAL_FILE, LOGS_DIR, SUMMARY_FILE

__all__ = ["COLUMNS", "STEP_COLUMNS", "NoResults", "UnreadableResults", "load", "repeats", "runs", "steps",
           "telemetry"]  # the public API (``from bench import results``)


def _log_error(exp: ExperimentFiles) -> str | None:
    from workloads.train.harness.outcome import root_cause

    for rel in sorted(f for f in exp.files if f.startswith(f"{LOGS_DIR}/") and f.endswith(".log")):
        got = exp.read_bytes(rel, R.MAX_LOG_TAIL_BYTES, tail=True)  # the root cause is in the tail
        cause = root_cause(got[0].decode("utf-8", "replace").splitlines()[-200:]) if got else None
        if cause:
            return R.cut_text(cause)
    return None


def _read(sources: tuple[str, ...], strict: bool, budget: Budget | None,
          results_root: Path | None = None) -> Iterator[tuple[dict[str, Any], RankLines]]:
    """Each experiment run's row with its rank lines, one run at a time, each rank file streamed once
    (``bench.results.rank_lines``). ``budget``: what the whole call may read; None: a budget of its own for each
    experiment run, and no step times (``load``, which keeps none of the lines)."""
    where = ", ".join(map(str, sources))
    for exp in experiments(sources, strict, results_root):
        summary = R.read_summary(exp.read_text(SUMMARY_FILE, R.MAX_JSON_BYTES), exp.name(SUMMARY_FILE))
        spend = budget or Budget()
        lines = rank_lines.read(exp, spend, times=budget is not None)
        failed = summary is None or summary.get(F.STATUS) != F.SUCCEEDED
        yield (row(summary, ids=exp.ids, by_rank=lines,
                   eval_doc=R.read_eval(exp.read_text(f"{EVAL_DIR}/{EVAL_FILE}", R.MAX_JSON_BYTES),
                                        exp.name(f"{EVAL_DIR}/{EVAL_FILE}")),
                   log_error=_log_error(exp) if failed and not (summary or {}).get(F.ERROR) else None,
                   location=exp.location, repeat=exp.repeat), lines)
        _warn(None if budget else spend.warning(exp.location))
    _warn(budget and budget.warning(where))


def _warn(said: str | None) -> None:
    if said:
        warnings.warn(said, stacklevel=4)


def runs(*sources: str, strict: bool = False) -> list[tuple[dict[str, Any], RankLines]]:
    """Each experiment run's row with its rank lines (``bench compare`` and ``bench report`` need both), at most
    ``MAX_STEP_ROWS`` lines and ``MAX_STEP_TIMES`` step times in all (then a warning names the file it stopped in).

    A missing source warns and adds nothing (those commands say "nothing loadable" in their own words);
    ``strict``: it raises NoResults, as ``load`` does.
    """
    return list(_read(sources, strict, Budget()))


def load(*sources: str, results_root: str | Path | None = None) -> "pandas.DataFrame":  # noqa: F821
    """One row per experiment run found under the sources (see the module docstring): folders, s3:// prefixes or
    run handles (``dev/20261127-091239``) under ``results_root`` (default: ``results/`` in the project found from
    the working folder; ``~`` expands). Each run's lines are read and let go before the next (at most
    ``MAX_STEP_ROWS`` of them a run), so memory grows with rows, not lines.

    Raises NoResults (a FileNotFoundError) for a source that does not exist.
    """
    return frame([r for r, _ in _read(sources, True, None, results_root)])


def steps(*sources: str, max_rows: int | None = None,
          results_root: str | Path | None = None) -> "pandas.DataFrame":  # noqa: F821
    """Per-rank, per-step metrics lines (for loss and step-time curves), at most ``max_rows`` of them
    (``MAX_STEP_ROWS``): counted as the lines are read, the rest are not read, with one warning naming the file
    where reading stopped.
    Sources and ``results_root`` are read as ``load`` reads them; raises NoResults (a FileNotFoundError) for a
    source that does not exist, as ``load`` does.
    """
    budget = Budget(lines=max_rows or R.MAX_STEP_ROWS)
    parts = [(exp.ids, exp.repeat, rank_lines.read(exp, budget, times=False))
             for exp in experiments(sources, strict=True, results_root=results_root)]
    _warn(budget.warning(", ".join(map(str, sources))))
    return step_frame(parts)


def telemetry(*sources: str, strict: bool = True,
              results_root: str | Path | None = None) -> "pandas.DataFrame":  # noqa: F821
    """The runs' hardware samples, one row per sample and device (``bench.results.hardware``: node, t, device,
    util_pct, memory, power, clocks, temperature, throttled, energy_j so far), at most ``MAX_TELEMETRY_ROWS`` in at
    most ``ROW_BYTES`` each; sources as ``load`` takes them. Raises NoResults (a FileNotFoundError) for a source that
    does not exist, as ``load`` does (``strict``: False warns instead, as ``runs``)."""
    import bench.results.hardware as T

    samples = T.Samples()
    for exp in experiments(sources, strict, results_root):
        T.read_samples(exp, samples)
        if samples.stopped:
            break
    return samples.frame()


REPEAT_COLUMNS = ("stack", "run_id", "experiment", "runs", "succeeded", "samples_per_s_mean", "samples_per_s_std",
                  "ci95_low", "ci95_high", "ci95_half_width_pct")


def repeats(df) -> "pandas.DataFrame":  # noqa: F821
    """One row per (stack, run_id, experiment): its runs, how many succeeded with a throughput, and the mean
    samples/s of those with its 95% Student-t interval (``bench.results.confidence``; no interval below 2 runs)."""
    import pandas as pd

    from bench.results.confidence import mean_interval

    out = []
    for (stack, run_id, experiment), g in df.groupby(["stack", "run_id", "experiment"], sort=True, dropna=False):
        ok = g[(g["status"] == F.SUCCEEDED) & g["samples_per_s"].notna()]["samples_per_s"].astype(float).tolist()
        ci = mean_interval(ok) if ok else None
        out.append({"stack": stack, "run_id": run_id, "experiment": experiment, "runs": len(g), "succeeded": len(ok),
                    "samples_per_s_mean": ci.mean if ci else None, "samples_per_s_std": ci.std if ci else None,
                    "ci95_low": ci.low if ci else None, "ci95_high": ci.high if ci else None,
                    "ci95_half_width_pct": round(100 * ci.half_width / ci.mean, 2)
                    if ci and ci.half_width is not None and ci.mean else None})
    return pd.DataFrame(out, columns=list(REPEAT_COLUMNS)).astype(
        {c: "float64" for c in REPEAT_COLUMNS[5:]} | {"runs": "int64", "succeeded": "int64"})
