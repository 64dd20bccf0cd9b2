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
(``MEASURES``: samples/s, step times, mfu, wall_s, cost_usd, hourly_usd, accuracy, ...) are
always float64, NaN where missing. Counts (``COUNTS``: repeat, nodes, gpus_per_node, world_size,
batch_size, restarts, samples_per_epoch) are int64 when every row has a whole number, else
float64 with NaN (pandas' own rule for a missing int). A value of the wrong type in a summary reads
as missing, with a warning. Text columns stay strings; device, config, command, busbw, what_ran
and startup hold the summary's dicts and lists (object).

Repeats: an experiment with ``repeats: N`` has one row per run, ``repeat`` = 1..N (its folder
``<experiment>/repeat_<k>/``); an experiment run without repeats has one row with ``repeat`` 1. So
the rows of one (stack, run_id, experiment) are its repeats, and ``repeats`` summarizes them. The
reading (local or S3) is in ``bench.results.files``; turning documents into rows is pure (``row``,
``step_rows``).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import bench.results.readers as R
import bench.results.rank_lines as rank_lines
from bench.results.files import ExperimentFiles, exists, find_experiments
from bench.results.rank_lines import Budget, RankLines
from bench.results.hardware import energy_figures
from bench.results.sources import resolve_sources
from bench.results.timeline import parse_iso
from core.catalog import aws as catalog
from core.contract import summary_fields as F
from core.contract.names import EVAL_DIR, EVAL_FILE, LOGS_DIR, SUMMARY_FILE
from core.contract.s3_uri import parse_s3_uri
from workloads.train.harness import what_ran

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
         "energy_j", "kwh", "power_mean_w", "joules_per_sample", "util_mean_pct", "util_p95_pct",
         "memory_peak_bytes", "memory_total_bytes", "throttle_s", "idle_share", "telemetry_note")
STEP_COLUMNS = ("stack", "run_id", "experiment", "repeat", "rank", "step", "loss", "step_time_s", "samples_per_s", "warmup",
                "restart", "world_size", "wall_time", "steps")  # step_time_s: the line's interval of ``steps`` steps
# The frame's dtypes (module docstring): measures float64; counts int64 when complete, else float64; times UTC.
MEASURES = ("samples_per_s", "samples_per_s_per_gpu", "step_time_p50_s", "step_time_p95_s", "mfu", "wall_s",
            "cost_usd", "accuracy", "time_to_accuracy_s", "hourly_usd", "usd_per_1k_samples", "tflops_per_s",
            "flops_per_sample", "loop_seconds", "data_wait_s", "data_wait_share", "energy_j", "kwh", "power_mean_w",
            "joules_per_sample", "util_mean_pct", "util_p95_pct", "memory_peak_bytes", "memory_total_bytes",
            "throttle_s", "idle_share")
COUNTS = ("repeat", "nodes", "gpus_per_node", "world_size", "batch_size", "restarts", "samples_per_epoch")
TIMES = ("started_at",)
LOCAL_IMAGE = what_ran.LOCAL_IMAGE
NO_SUMMARY = "no summary.json: the launcher did not finish (killed, evicted or timed out)"


instance_price = catalog.usd_per_hour  # On-demand USD/hour of one instance in a region, None where unknown
# A run whose steady steps spend this share of their time waiting for data measures its input path, not its model.
INPUT_BOUND_SHARE = 0.25


# ---- pure: documents -> rows ------------------------------------------------------------

def steady_step_times(by_rank: Mapping[int, list[dict[str, Any]]]) -> list[float]:
    """Each steady (non-warm-up) step's time: the slowest rank's, as a synchronous step ends with it."""
    return RankLines.of(by_rank).steady_step_times.tolist()


def data_wait_share(wait_s: Any, steady_s: Any) -> float | None:
    """The share (0..1) of the steady steps' time spent waiting for data: the most-waiting rank's wait over the
    steady intervals' time (the slowest rank's, as the throughput counts it); None where either is unknown."""
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (wait_s, steady_s)):
        return None
    if steady_s <= 0 or wait_s < 0:
        return None
    return round(min(1.0, wait_s / steady_s), 4)


def input_bound(share: Any) -> bool:
    return isinstance(share, float) and share >= INPUT_BOUND_SHARE


def _gpu(summary: Mapping[str, Any], device: Mapping[str, Any]) -> str | None:
    if device.get("name"):
        return device["name"]
    return "cpu" if summary.get("image") == LOCAL_IMAGE else None


def row(summary: Mapping[str, Any] | None, *, ids: tuple[str | None, str | None, str | None],
        by_rank: Mapping[int, list[dict[str, Any]]] | None = None, eval_doc: Mapping[str, Any] | None = None,
        log_error: str | None = None, location: str | None = None,
        price: Callable[[str | None, str | None], float | None] = instance_price, repeat: int = 1) -> dict[str, Any]:
    """One experiment run as a flat row. ``summary`` None means it was missing or unreadable; ``by_rank``: its
    metrics lines (a RankLines, or dicts as the readers give them)."""
    lines = RankLines.of(by_rank or {})
    s = dict(summary or {})
    cfg = s.get(F.CONFIG) or {}
    tp = s.get(F.THROUGHPUT) or {}
    acc = s.get(F.ACCURACY) or {}
    device = s.get(F.DEVICE) or {}
    command = s.get(F.COMMAND) or []
    launch = s.get(F.LAUNCH) or {}
    stack, run_id, experiment = ids
    world_sizes = s.get(F.WORLD_SIZES) or lines.world_sizes()
    # what the trainer reported, else the launch shape the launcher recorded (a run that never reported)
    gpus_per_node = s.get(F.GPUS_PER_NODE) or launch.get(F.LAUNCH_PROCS_PER_NODE)
    nodes = s.get(F.NODES) or launch.get(F.LAUNCH_NODES)
    world_size = max(world_sizes) if world_sizes else (nodes * gpus_per_node if nodes and gpus_per_node else None)
    gpu = _gpu(s, device)
    instance_type = s.get(F.INSTANCE_TYPE)
    region = run_region(s)
    hourly = price(instance_type, region) if gpu != "cpu" else None
    hourly = hourly * (nodes or 1) if hourly else None
    wall = s.get(F.WALL_TIME_S)
    rate = tp.get(F.SAMPLES_PER_S_TOTAL)
    status = s.get(F.STATUS) or "failed"
    error = s.get(F.ERROR) or (s.get(F.STOP_REASON) if status != F.SUCCEEDED else None) or log_error
    if status != F.SUCCEEDED and not error:
        error = NO_SUMMARY if summary is None else f"exit code {s.get(F.EXIT_CODE)}, no exception in the log tail"
    ev_acc = (eval_doc or {}).get("accuracy")
    return {
        "stack": stack, "run_id": run_id, "experiment": experiment or s.get(F.EXPERIMENT), "repeat": repeat,
        "workload": cfg.get("workload"), "framework": s.get(F.FRAMEWORK) or "pytorch", "status": status,
        "instance_type": instance_type, "gpu": gpu, "nodes": nodes, "gpus_per_node": gpus_per_node,
        "world_size": world_size, "batch_size": cfg.get("batch_size"),
        "precision": s.get("precision") or cfg.get("precision"),  # what the ranks trained in (a CPU's choice)
        # per device: a GPU (a TensorFlow worker drives several), or a CPU run's process; older summaries: per process
        "samples_per_s": rate, "samples_per_s_per_gpu": tp.get(F.SAMPLES_PER_S_PER_DEVICE,
                                                               tp.get(F.SAMPLES_PER_S_PER_PROCESS)),
        "step_time_p50_s": tp.get(F.STEP_TIME_P50_S) or lines.steady_quantile(0.5),
        "step_time_p95_s": tp.get(F.STEP_TIME_P95_S) or lines.steady_quantile(0.95),
        "mfu": s.get(F.MFU) if gpu not in (None, "cpu") else None,
        "wall_s": wall, "cost_usd": round(hourly * wall / 3600, 4) if hourly and wall else None,
        "accuracy": ev_acc if ev_acc is not None else acc.get(F.BEST_ACCURACY),
        "time_to_accuracy_s": acc.get(F.TIME_TO_ACCURACY_S),
        "restarts": s.get(F.RESTARTS, lines.most_restarts()),
        "results_uri": s.get(F.RESULTS_URI) or location, "error": error,
        "hourly_usd": hourly,
        "usd_per_1k_samples": round(hourly / 3.6 / rate, 6) if hourly and rate else None,
        "region": region, "prices": prices_note(gpu, instance_type, region, priced=bool(hourly)),
        "tflops_per_s": s.get(F.TFLOPS_PER_S), "flops_per_sample": s.get(F.FLOPS_PER_SAMPLE),
        "loop_seconds": s.get(F.LOOP_SECONDS), "data_wait_s": s.get(F.DATA_WAIT_S),
        "data_wait_share": data_wait_share(s.get(F.DATA_WAIT_S), tp.get("steady_seconds")),
        "started_at": s.get(F.STARTED_AT), "image": s.get(F.IMAGE), "git_commit": s.get(F.GIT_COMMIT),
        "device": device or None, "config": cfg or None, "command": command or None,
        # the allreduce workload's bus bandwidth, and the NCCL transport judged (core.catalog.fabric)
        "busbw": _dict(s.get(F.BUSBW)) or None,
        "fabric": _dict(s.get(F.FABRIC)).get("verdict"),
        "flags": ("; ".join(str(f) for f in s[F.FLAGS] if f) or None) if isinstance(s.get(F.FLAGS), list) else None,
        "what_ran": s.get(F.WHAT_RAN), "what_ran_unknown": s.get(F.WHAT_RAN_UNKNOWN), "startup": s.get(F.STARTUP),
        "samples_per_epoch": s.get(F.SAMPLES_PER_EPOCH),
        **energy_figures(s.get(F.TELEMETRY), rate),
    }


def run_region(summary: Mapping[str, Any]) -> str | None:
    """The region the run's pods ran in (``what_ran.region``, else its pinned zone's), None where unknown."""
    ran = _dict(summary.get(F.WHAT_RAN))
    return ran.get(F.REGION) or catalog.region_of_zone(ran.get(F.ZONE))


def prices_note(gpu: str | None, instance_type: str | None, region: str | None, *, priced: bool) -> str | None:
    """What the row's dollar figures are priced at (region, source, date), or why it has none (a GPU run only)."""
    if gpu == "cpu" or not instance_type:
        return None
    return catalog.price_label(region) if priced else catalog.no_price(instance_type, region)


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


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


# ---- I/O edges ----------------------------------------------------------------------------


def _log_error(exp: ExperimentFiles) -> str | None:
    from workloads.train.harness.outcome import root_cause

    for rel in sorted(f for f in exp.files if f.startswith(f"{LOGS_DIR}/") and f.endswith(".log")):
        got = exp.read_bytes(rel, R.MAX_LOG_TAIL_BYTES, tail=True)  # the root cause is in the tail
        cause = root_cause(got[0].decode("utf-8", "replace").splitlines()[-200:]) if got else None
        if cause:
            return R.cut_text(cause)
    return None


LOOKED_FOR = "experiment results (summary.json, metrics/ or logs/)"


class NoResults(FileNotFoundError, LookupError):
    """A source that does not exist. A LookupError too, so ``bench report`` says it in one line (exit 2)."""


class UnreadableResults(PermissionError, LookupError):
    """A source that cannot be listed (no AWS credentials, access denied, no network): ``load`` raises it with the
    one line that says why, where it once gave an empty frame and a warning."""


def _local_absent(source: str) -> str | None:
    """Why a local source cannot hold results (it is not there, or is a file), None when it is a folder."""
    if exists(source, folder=True):
        return None
    what = "not a folder" if exists(source) else "no such folder"
    return f"{source}: {what}; looked for {LOOKED_FOR} under it"


def _s3_absent(uri: str) -> str | None:
    """Why an s3:// source holds nothing (no bucket, no object under the prefix); None when it has objects or
    cannot be asked (no credentials, no network: ``find_experiments`` has warned)."""
    import boto3

    try:
        bucket, prefix = parse_s3_uri(uri)
    except ValueError:
        return None
    try:
        listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except Exception as e:  # noqa: BLE001 -- botocore's ClientError, told apart by its code
        code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
        return f"{uri}: no such bucket {bucket!r}; looked for {LOOKED_FOR}" if code == "NoSuchBucket" else None
    if listed.get("KeyCount", len(listed.get("Contents") or [])):
        return None
    return f"{uri}: no objects under s3://{bucket}/{prefix}; looked for {LOOKED_FOR}"


def _experiments(sources: tuple[str, ...], strict: bool, results_root: str | Path | None = None
                 ) -> list[ExperimentFiles]:
    """The experiment folders under the sources (run handles resolved under ``results_root``,
    ``bench.results.sources``); ``strict``: NoResults for a source that does not exist."""
    found = []
    for source in resolve_sources(sources, results_root=results_root):
        s3 = source.startswith("s3://")
        absent = _local_absent(source) if strict and not s3 else None
        if absent:
            raise NoResults(absent)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exps = find_experiments(source)
        if strict and exps is None and caught:  # a bucket that is not there is NoResults, below; else why not
            if not (s3 and _s3_absent(source)):
                raise UnreadableResults(str(caught[-1].message))
        for w in caught:  # not strict, or a warning about one file: passed on as it came
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        absent = _s3_absent(source) if strict and s3 and not exps else None
        if absent:
            raise NoResults(absent)
        if exps == []:
            warnings.warn(f"{source}: no experiment results found (no summary.json, metrics/ or logs/)", stacklevel=3)
        found += exps or []
    return found


def _read(sources: tuple[str, ...], strict: bool, budget: Budget | None,
          results_root: Path | None = None) -> Iterator[tuple[dict[str, Any], RankLines]]:
    """Each experiment run's row with its rank lines, one run at a time, each rank file streamed once
    (``bench.results.rank_lines``). ``budget``: what the whole call may read; None: a budget of its own for each
    experiment run, and no step times (``load``, which keeps none of the lines)."""
    where = ", ".join(map(str, sources))
    for exp in _experiments(sources, strict, results_root):
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
             for exp in _experiments(sources, strict=True, results_root=results_root)]
    _warn(budget.warning(", ".join(map(str, sources))))
    return step_frame(parts)


def telemetry(*sources: str, strict: bool = True,
              results_root: str | Path | None = None) -> "pandas.DataFrame":  # noqa: F821
    """The runs' hardware samples, one row per sample and device (``bench.results.hardware``: node, t, device,
    util_pct, memory, power, clocks, temperature, throttled, energy_j so far), at most ``MAX_TELEMETRY_ROWS``;
    sources as ``load`` takes them. Raises NoResults (a FileNotFoundError) for a source that does not exist, as
    ``load`` does (``strict``: False warns instead, as ``runs``)."""
    import bench.results.hardware as T

    rows: list[tuple] = []
    budget = [T.MAX_TELEMETRY_ROWS]
    for exp in _experiments(sources, strict, results_root):
        T.read_samples(exp, rows, budget)
        if budget[0] <= 0:
            break
    return T.frame(rows)


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
