"""One experiment run's documents (summary.json, its metrics lines, eval.json, the log's root cause) as one flat
row of ``results.load``'s frame: what ran where, how fast, what it cost, where it came from, what the hardware
did and, for a language model, its tokens, losses and cost and energy per token. Pure: the reading is in
``bench.results.frames`` and ``bench.results.files``."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from bench.results.hardware import energy_figures
from bench.results.language_model import block_figure, language_model_columns
from bench.results.rank_lines import RankLines
from core.catalog import aws as catalog
from core.contract import summary_fields as F
from core.contract.names import SUMMARY_FILE
from workloads.train.harness import what_ran

LOCAL_IMAGE = what_ran.LOCAL_IMAGE
NO_SUMMARY = "no summary.json: the launcher did not finish (killed, evicted or timed out)"
instance_price = catalog.usd_per_hour  # On-demand USD/hour of one instance in a region, None where unknown
# A run whose steady steps spend this share of their time waiting for data measures its input path, not its model.
INPUT_BOUND_SHARE = 0.25


def data_wait_share(wait_s: Any, steady_s: Any) -> float | None:
    """The share (0..1) of the steady steps' time spent waiting for data: the most-waiting rank's wait over the
    steady intervals' time (the slowest rank's, as the throughput counts it); None where either is unknown."""
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (wait_s, steady_s)):
        return None
    if steady_s <= 0 or wait_s < 0:
        return None
    return round(min(1.0, wait_s / steady_s), 4)


def input_bound(share: Any) -> bool:
    """Whether a run's data-wait share says it measured its input path rather than its model."""
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
    metrics lines (a RankLines, or dicts as the readers give them). The columns come in the frame's order: what
    ran where, how fast, where its results are and why it failed, what it cost, where it came from, its energy."""
    lines = RankLines.of(by_rank or {})
    s = dict(summary or {})
    gpu = _gpu(s, s.get(F.DEVICE) or {})
    shape = launch_shape(s, lines)
    region = run_region(s)
    hourly = run_hourly(s, gpu=gpu, nodes=shape[0], region=region, price=price)
    energy = energy_figures(s.get(F.TELEMETRY), (s.get(F.THROUGHPUT) or {}).get(F.SAMPLES_PER_S_TOTAL),
                            where=location or SUMMARY_FILE)
    return {**_what_ran_where(s, ids, repeat, gpu=gpu, shape=shape),
            **_speed(s, lines, gpu=gpu, hourly=hourly, eval_doc=eval_doc),
            "results_uri": s.get(F.RESULTS_URI) or location,
            "error": run_error(s, missing=summary is None, log_error=log_error),
            **_prices(s, gpu=gpu, hourly=hourly, region=region),
            **_provenance(s), **energy,
            # a language model's figures (None for any other run): tokens, losses, cost and energy per token
            **language_model_columns(s, hourly=hourly, power_mean_w=energy["power_mean_w"])}


def run_hourly(s: Mapping[str, Any], *, gpu: str | None, nodes: Any, region: str | None,
               price: Callable[[str | None, str | None], float | None] = instance_price) -> float | None:
    """What the run's instances cost an hour on demand in its region (one instance's price x nodes); None for a
    local CPU run, or where the catalog has no price there."""
    hourly = price(s.get(F.INSTANCE_TYPE), region) if gpu != "cpu" else None
    return hourly * (nodes or 1) if hourly else None


def launch_shape(s: Mapping[str, Any], lines: RankLines) -> tuple[Any, Any, Any]:
    """(nodes, GPUs per node, world size): what the trainer reported, else the launch shape the launcher recorded
    (a run that never reported); the world size is the largest the lines saw, else nodes x GPUs per node."""
    launch = s.get(F.LAUNCH) or {}
    world_sizes = s.get(F.WORLD_SIZES) or lines.world_sizes()
    gpus_per_node = s.get(F.GPUS_PER_NODE) or launch.get(F.LAUNCH_PROCS_PER_NODE)
    nodes = s.get(F.NODES) or launch.get(F.LAUNCH_NODES)
    world_size = max(world_sizes) if world_sizes else (nodes * gpus_per_node if nodes and gpus_per_node else None)
    return nodes, gpus_per_node, world_size


def run_error(s: Mapping[str, Any], *, missing: bool, log_error: str | None) -> str | None:
    """Why a run did not succeed: its error, its stop reason, the log's root cause, else what is known of its end."""
    status = s.get(F.STATUS) or "failed"
    error = s.get(F.ERROR) or (s.get(F.STOP_REASON) if status != F.SUCCEEDED else None) or log_error
    if status != F.SUCCEEDED and not error:
        error = NO_SUMMARY if missing else f"exit code {s.get(F.EXIT_CODE)}, no exception in the log tail"
    return error


def _what_ran_where(s: Mapping[str, Any], ids: tuple[str | None, str | None, str | None], repeat: int, *,
                    gpu: str | None, shape: tuple[Any, Any, Any]) -> dict[str, Any]:
    """The row's first columns: which run, which workload and framework, its status, hardware and shape."""
    cfg = s.get(F.CONFIG) or {}
    stack, run_id, experiment = ids
    nodes, gpus_per_node, world_size = shape
    return {
        "stack": stack, "run_id": run_id, "experiment": experiment or s.get(F.EXPERIMENT), "repeat": repeat,
        "workload": cfg.get("workload"), "framework": s.get(F.FRAMEWORK) or "pytorch",
        "status": s.get(F.STATUS) or "failed",
        "instance_type": s.get(F.INSTANCE_TYPE), "gpu": gpu, "nodes": nodes, "gpus_per_node": gpus_per_node,
        "world_size": world_size, "batch_size": cfg.get("batch_size"),
        "precision": s.get("precision") or cfg.get("precision"),  # what the ranks trained in (a CPU's choice)
    }


def _speed(s: Mapping[str, Any], lines: RankLines, *, gpu: str | None, hourly: float | None,
           eval_doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """How fast and how far it trained: throughput, step times, MFU, wall time and cost, accuracy, restarts."""
    tp = s.get(F.THROUGHPUT) or {}
    acc = s.get(F.ACCURACY) or {}
    wall = s.get(F.WALL_TIME_S)
    ev_acc = (eval_doc or {}).get("accuracy")
    return {
        # per device: a GPU (a TensorFlow worker drives several), or a CPU run's process; older summaries: per process
        "samples_per_s": tp.get(F.SAMPLES_PER_S_TOTAL),
        "samples_per_s_per_gpu": tp.get(F.SAMPLES_PER_S_PER_DEVICE, tp.get(F.SAMPLES_PER_S_PER_PROCESS)),
        "step_time_p50_s": tp.get(F.STEP_TIME_P50_S) or lines.steady_quantile(0.5),
        "step_time_p95_s": tp.get(F.STEP_TIME_P95_S) or lines.steady_quantile(0.95),
        # a language model's block has it where the summary's top level does not
        "mfu": (s.get(F.MFU) if s.get(F.MFU) is not None else block_figure(s, F.MFU))
        if gpu not in (None, "cpu") else None,
        "wall_s": wall, "cost_usd": round(hourly * wall / 3600, 4) if hourly and wall else None,
        "accuracy": ev_acc if ev_acc is not None else acc.get(F.BEST_ACCURACY),
        "time_to_accuracy_s": acc.get(F.TIME_TO_ACCURACY_S),
        "restarts": s.get(F.RESTARTS, lines.most_restarts()),
    }


def _prices(s: Mapping[str, Any], *, gpu: str | None, hourly: float | None, region: str | None) -> dict[str, Any]:
    """What the run cost an hour and per 1,000 samples, its region and what the prices are; then the work done and
    the time spent waiting for data."""
    tp = s.get(F.THROUGHPUT) or {}
    rate = tp.get(F.SAMPLES_PER_S_TOTAL)
    instance_type = s.get(F.INSTANCE_TYPE)
    return {
        "hourly_usd": hourly,
        "usd_per_1k_samples": round(hourly / 3.6 / rate, 6) if hourly and rate else None,
        "region": region, "prices": prices_note(gpu, instance_type, region, priced=bool(hourly)),
        "tflops_per_s": s.get(F.TFLOPS_PER_S), "flops_per_sample": s.get(F.FLOPS_PER_SAMPLE),
        "loop_seconds": s.get(F.LOOP_SECONDS), "data_wait_s": s.get(F.DATA_WAIT_S),
        "data_wait_share": _first(data_wait_share(s.get(F.DATA_WAIT_S), tp.get("steady_seconds")),
                                  block_figure(s, "data_wait_share")),  # a language model's block has it too
    }


def _provenance(s: Mapping[str, Any]) -> dict[str, Any]:
    """Where the run came from: start, image, commit, device, config and command, fabric, flags, what ran."""
    return {
        "started_at": s.get(F.STARTED_AT), "image": s.get(F.IMAGE), "git_commit": s.get(F.GIT_COMMIT),
        "device": s.get(F.DEVICE) or None, "config": s.get(F.CONFIG) or None, "command": s.get(F.COMMAND) or None,
        # the allreduce workload's bus bandwidth, and the NCCL transport judged (core.catalog.fabric)
        "busbw": _dict(s.get(F.BUSBW)) or None,
        "fabric": _dict(s.get(F.FABRIC)).get("verdict"),
        "flags": ("; ".join(str(f) for f in s[F.FLAGS] if f) or None) if isinstance(s.get(F.FLAGS), list) else None,
        "what_ran": s.get(F.WHAT_RAN), "what_ran_unknown": s.get(F.WHAT_RAN_UNKNOWN), "startup": s.get(F.STARTUP),
        "samples_per_epoch": s.get(F.SAMPLES_PER_EPOCH),
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


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
