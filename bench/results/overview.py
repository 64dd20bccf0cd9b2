"""One row per experiment run, as ``bench status`` and the results table at the end of ``bench run`` show it.

What a user looks for first in a run: its status and why it stopped, when it started, how long it ran,
its throughput (steady samples/s, or for the all-reduce workload, which trains nothing, its peak bus
bandwidth) and where its results are. Both backends build their rows here from a summary.json that came
from a run: every field is checked (a wrong type reads as missing), so a hostile or half-written summary
gives a row with what could be read, never an exception.
"""

from __future__ import annotations

from typing import Any, Mapping

from bench.results.hardware import energy_figures
from bench.results.language_model import block, block_figure, language_model_columns
from bench.results.readers import integer, number, positive, text
from bench.results.timeline import parse_iso
from core.contract import summary_fields as F

UNKNOWN = "unknown"  # the status of a run whose summary.json is there but cannot be read
NO_SUMMARY = "no summary"
RUNNING = "running"
# A language model's figures in a status row (None for any other run)
LM_STATUS = ("model_size", "tokens_per_s", "tokens_per_s_per_device", "mfu", "mfu_fp8_peak", "final_val_loss",
             "usd_per_billion_tokens", "joules_per_token", "kwh_per_billion_tokens")


def run_figures(summary: Any) -> dict[str, Any]:
    """The figures of one summary (any value: not a dict reads as an empty summary):

    ``status``, ``stop_reason`` (why a run that did not succeed stopped), ``error`` (its root cause),
    ``started_at`` (ISO 8601, None when it is not one), ``started_invalid`` (the summary gives a start that
    is no time: not ISO 8601, or outside ``timeline.parse_iso``'s years), ``wall_s``, ``steps``,
    ``samples_per_s`` and ``samples_per_s_per_process`` (None for the all-reduce workload), ``busbw_peak_gbps`` with
    ``busbw_peak_at_bytes`` and ``message_sizes`` (the all-reduce workload's, else None), ``flags`` (what the run
    is marked with: a CPU another local run shared, NCCL on sockets; None where nothing), ``joules_per_sample`` and
    ``kwh`` (energy per result, where the run's telemetry measured power: ``bench.results.hardware``), and a
    language model's figures (``LM_STATUS``: ``language_model_status``)."""
    s = summary if isinstance(summary, Mapping) else {}
    tp = s.get(F.THROUGHPUT) if isinstance(s.get(F.THROUGHPUT), Mapping) else {}
    coverage = s.get("coverage") if isinstance(s.get("coverage"), Mapping) else {}
    busbw = s.get(F.BUSBW) if isinstance(s.get(F.BUSBW), Mapping) else {}
    curve = busbw.get(F.BUSBW_CURVE)
    peak = busbw.get(F.BUSBW_PEAK_GBPS)
    peak = float(peak) if positive(peak) else None
    started = s.get(F.STARTED_AT)
    energy = energy_figures(s.get(F.TELEMETRY), tp.get(F.SAMPLES_PER_S_TOTAL))

    def pick(value: Any, check: Any) -> Any:
        return value if value is not None and check(value) else None

    return {
        "status": pick(s.get(F.STATUS), text),
        "stop_reason": pick(s.get(F.STOP_REASON), text),
        "error": pick(s.get(F.ERROR), text),
        "started_at": started if parse_iso(started) is not None else None,
        "started_invalid": isinstance(started, str) and parse_iso(started) is None,
        "wall_s": pick(s.get(F.WALL_TIME_S), number),
        # the all-reduce workload takes no training steps: its summary's 0 is no figure
        "steps": None if peak is not None else pick(coverage.get("steps"), integer),
        "samples_per_s": pick(tp.get(F.SAMPLES_PER_S_TOTAL), positive),
        "samples_per_s_per_process": pick(tp.get(F.SAMPLES_PER_S_PER_PROCESS), positive),
        "busbw_peak_gbps": peak,
        "busbw_peak_at_bytes": pick(busbw.get("peak_at_bytes"), integer) if peak is not None else None,
        "message_sizes": len(curve) if peak is not None and isinstance(curve, list) else None,
        # what the run is marked with (another local run shared the CPU; NCCL on sockets), as text
        "flags": ([f for f in s[F.FLAGS] if text(f)] or None) if isinstance(s.get(F.FLAGS), list) else None,
        **{k: v for k, v in energy.items() if k in ("joules_per_sample", "kwh")},
        **language_model_status(s, energy["power_mean_w"]),
    }


def language_model_status(s: Mapping[str, Any], power_mean_w: float | None) -> dict[str, Any]:
    """A language model's figures for ``bench status`` (``LM_STATUS``; all None for any other run): tokens/s (all
    GPUs and per GPU), MFU (both conventions for float8), the last validation loss, and per billion tokens the
    dollars at the region's on-demand price (``run_row.run_hourly``) and the energy at the measured power."""
    from bench.results.run_row import run_hourly, run_region

    if not block(s):
        return dict.fromkeys(LM_STATUS)
    device, launch, ran = (s.get(k) if isinstance(s.get(k), Mapping) else {} for k in (F.DEVICE, F.LAUNCH,
                                                                                          F.WHAT_RAN))
    gpu = device.get("name") if text(device.get("name")) else None
    nodes = next((n for n in (s.get(F.NODES), launch.get(F.LAUNCH_NODES)) if integer(n) and n > 0), None)
    # only text reaches the price catalog's lookups: this summary may be unchecked (bench.cloud's S3 reads)
    priced = {F.INSTANCE_TYPE: s.get(F.INSTANCE_TYPE) if text(s.get(F.INSTANCE_TYPE)) else None,
              F.WHAT_RAN: {k: ran.get(k) for k in (F.REGION, F.ZONE) if text(ran.get(k))}}
    hourly = run_hourly(priced, gpu=gpu, nodes=nodes, region=run_region(priced)) if gpu else None
    got = language_model_columns(s, hourly=hourly, power_mean_w=power_mean_w)
    return {**{k: got.get(k) for k in LM_STATUS}, "mfu": block_figure(s, F.MFU)}


def nodes_text(e: Any) -> str:
    """An experiment's nodes for the results table: ``2``, or ``1:2`` (least:most) for an elastic one."""
    return f"{e.min_nodes}:{e.max_nodes}" if e.elastic else str(e.max_nodes)


def table_row(label: str, status: str, shape: str, fig: Mapping[str, Any], *, wall: Any, accuracy: Any,
              path: str) -> dict[str, Any]:
    """The results table's row of an experiment run, local or on AWS: ``fig`` its ``run_figures``."""
    return {"experiment": label, "status": status, "shape": shape, "steps": fig["steps"],
            "total": fig["samples_per_s"], "per_process": fig["samples_per_s_per_process"],
            "busbw_peak_gbps": fig["busbw_peak_gbps"], "wall": wall, "accuracy": accuracy, "path": path,
            "joules_per_sample": fig["joules_per_sample"], "kwh": fig["kwh"],
            # a language model's rate is in tokens, and its quality is its last validation loss
            "tokens_per_s": fig["tokens_per_s"], "tokens_per_s_per_device": fig["tokens_per_s_per_device"],
            "val_loss": fig["final_val_loss"]}


def status_row(*, run: str, experiment: str, repeat: int | None, summary: Any, results: str,
               missing: str | None = None) -> dict[str, Any]:
    """One row of ``bench status``: ``summary`` as read (None: absent; ``{}`` or not a dict: there but
    unreadable), ``results`` where the experiment's results are, ``missing`` why there is no summary yet
    (the status then is ``no summary``, or ``running`` when ``missing`` starts with "step")."""
    row: dict[str, Any] = {"run": run, "experiment": experiment, "repeat": repeat}
    if summary is None:
        status = RUNNING if (missing or "").startswith("step") else NO_SUMMARY
        row.update(run_figures(None), status=status, stop_reason=missing)
    else:
        row.update(run_figures(summary))
        if row["status"] is None:
            row.update(status=UNKNOWN, stop_reason="summary.json unreadable or without a status")
    row["results"] = results
    return row


def label(row: Mapping[str, Any]) -> str:
    """The experiment as the status lines name it: ``name``, or ``name repeat k``."""
    return f"{row['experiment']} repeat {row['repeat']}" if row.get("repeat") else str(row["experiment"])


def status_text(row: Mapping[str, Any]) -> str:
    """The status with why it stopped when it did not succeed: ``failed (exit code 1: RuntimeError: ...)``."""
    why = "" if row.get("status") == F.SUCCEEDED else why_stopped(row)
    return f"{row.get('status')}" + (f" ({why})" if why else "")


def why_stopped(row: Mapping[str, Any]) -> str:
    """The summary's stop reason, and its root cause for a failure (the reason alone says "exit code 1")."""
    parts = [row.get("stop_reason"), row.get("error") if row.get("status") == F.FAILED else None]
    return ": ".join(str(p) for p in parts if p)


def run_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` run by run, oldest run first (newest last, as a log reads), and in each run by start.

    A run starts when its first experiment did; runs none of whose summaries says when (still running,
    or unreadable) come after the others, by run id (local run ids are their start times)."""
    starts: dict[str, float] = {}
    for r in rows:
        t = parse_iso(r.get("started_at"))
        if t is not None:
            starts[r["run"]] = min(t, starts.get(r["run"], t))
    runs = sorted({r["run"] for r in rows}, key=lambda run: (starts.get(run, float("inf")), run))
    place = {run: i for i, run in enumerate(runs)}
    never = float("inf")
    return sorted(rows, key=lambda r: (place[r["run"]], parse_iso(r.get("started_at")) or never))  # stable


def merged(local: list[dict[str, Any]], s3: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of both places, one per experiment run, oldest run first. A cloud run is on S3 and, once
    ``bench run`` copied it home, in the local results too: its row is the copy's while the copy has a
    summary (the same file), else S3's; ``local`` and ``s3`` say where each copy is, ``results`` the first."""
    out: dict[tuple, dict[str, Any]] = {}
    for where, rows in (("local", local), ("s3", s3)):
        for r in rows:
            key = (r["run"], r["experiment"], r.get("repeat"))
            row = {**r, "local": None, "s3": None}
            row[where] = r["results"]
            seen = out.get(key)
            if seen is None:
                out[key] = row
                continue
            if seen["status"] in (NO_SUMMARY, RUNNING, UNKNOWN) and row["status"] not in (NO_SUMMARY, UNKNOWN):
                row["local"] = seen["local"]
                out[key] = row
            else:
                seen[where] = r["results"]
    for row in out.values():
        row["results"] = row["local"] or row["s3"]
    return run_order(list(out.values()))


def by_run(rows: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """``{run id: {experiment (and repeat): status, with why it stopped}}``: the rows as a plain mapping."""
    runs: dict[str, dict[str, str]] = {}
    for row in rows:
        runs.setdefault(row["run"], {})[label(row)] = status_text(row)
    return runs


def no_experiment(stack: str, run: str, experiment: str, experiments: list[str]) -> str:
    """One line for a run that lacks an experiment asked for (``status``, ``logs``): the run's experiments."""
    return (f"run {run} of stack {stack} has no experiment {experiment!r}; its experiments: "
            f"{', '.join(experiments) or 'none'}")


def handle_rows(rows: list[dict[str, Any]], stack: str, run: str | None, experiment: str | None
                ) -> list[dict[str, Any]]:
    """The rows a run handle names (``<stack>[/<run-id>[/<experiment>]]``); ValueError, one line naming the
    stack's runs or the run's experiments, for a run or an experiment that is not there."""
    if run is None:
        return rows
    mine = [r for r in rows if r["run"] == run]
    if not mine:
        runs = list(dict.fromkeys(r["run"] for r in rows))
        shown = ", ".join(runs[-10:]) if runs else "none"
        raise ValueError(f"stack {stack} has no run {run!r}; its runs{' (the last 10)' if len(runs) > 10 else ''}: "
                         f"{shown}")
    if experiment is None:
        return mine
    found = [r for r in mine if r["experiment"] == experiment]
    if not found:
        raise ValueError(no_experiment(stack, run, experiment, list(dict.fromkeys(r["experiment"] for r in mine))))
    return found
