"""A language model's figures in ``summary.json`` (its ``language_model`` block): tokens per second (all GPUs, and
per GPU), FLOPs per token, achieved TFLOP/s per GPU, MFU (for float8 against both peaks, each labelled), the
data-wait share of the steady time, the training loss, the validation losses, and the tokens and time to a target
validation loss.

Pure functions over what the trainer already wrote (``run_info``'s ``tokens_per_sample``, ``flops_per_token``,
shape and mesh; the evaluations file's ``val_loss`` lines) and the throughput the summary already computed: a
sample is a sequence, so a token rate is the sample rate x ``tokens_per_sample``. Cost and energy per billion
tokens need the region's price and the nodes' telemetry: ``bench.results`` adds them to a run's row.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from core.catalog.llm import mfu
from core.catalog.peaks import fp8_peak_tflops, peak_tflops
from core.contract import summary_fields as F

SHAPE_KEYS = ("model_size", "parameters", "seq_len", "tensor_parallel", "data_parallel", "sharding",
              "activation_checkpoint", "fp8_recipe", "mesh")


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def language_model_figures(tp: Mapping[str, Any], info: Mapping[str, Any], evals: list[dict[str, Any]],
                           by_rank: Mapping[int, list[dict[str, Any]]], precision: str | None) -> dict[str, Any] | None:
    """The block, or None for a run that trained no language model (no ``tokens_per_sample`` in its run_info)."""
    tokens = _number(info.get("tokens_per_sample"))
    if not tokens:
        return None
    per_token = _number(info.get("flops_per_token"))
    total, per_device = _number(tp.get(F.SAMPLES_PER_S_TOTAL)), _number(tp.get(F.SAMPLES_PER_S_PER_DEVICE))
    tokens_per_device = per_device * tokens if per_device else None
    out: dict[str, Any] = {k: info.get(k) for k in SHAPE_KEYS}
    out.update({F.TOKENS_PER_S: round(total * tokens, 3) if total else None,
                F.TOKENS_PER_S_PER_DEVICE: round(tokens_per_device, 3) if tokens_per_device else None,
                F.FLOPS_PER_TOKEN: per_token, "tokens_per_sequence": int(tokens),
                "data_wait_share": _share(tp, by_rank), **_utilisation(per_token, tokens_per_device, info, precision),
                **_losses(by_rank, evals, info.get("target_loss"), tokens)})
    return out


def _utilisation(per_token: float | None, tokens_per_device: float | None, info: Mapping[str, Any],
                 precision: str | None) -> dict[str, Any]:
    """TFLOP/s per GPU and MFU; a float8 run's MFU against the bf16 peak (TorchTitan's and AWS's convention) and
    against the fp8 peak (NVIDIA's), each under its own name."""
    device = (info.get("device") or {}).get("name")
    out: dict[str, Any] = {"tflops_per_s_per_gpu": None, F.MFU: None, "mfu_convention": None, "mfu_fp8_peak": None}
    if not per_token or not tokens_per_device or not device or device == "cpu":
        return out
    out["tflops_per_s_per_gpu"] = round(per_token * tokens_per_device / 1e12, 6)
    peak, _ = peak_tflops(device, precision or "bf16")
    if peak:
        out[F.MFU] = round(mfu(per_token, tokens_per_device, peak), 6)
        out["mfu_convention"] = (f"against the bf16 peak, {peak:g} TFLOP/s (TorchTitan's and AWS's for float8)"
                                 if precision == "fp8" else f"against the {precision} peak, {peak:g} TFLOP/s")
    fp8_peak = fp8_peak_tflops(device) if precision == "fp8" else None
    if fp8_peak:
        out["mfu_fp8_peak"] = round(mfu(per_token, tokens_per_device, fp8_peak), 6)  # NVIDIA's convention
    return out


def _share(tp: Mapping[str, Any], by_rank: Mapping[int, list[dict[str, Any]]]) -> float | None:
    """The share of the steady time the most-waiting rank spent waiting for batches."""
    seconds = _number(tp.get("steady_seconds"))
    waits = [sum(r.get("data_wait_s") or 0.0 for r in lines if not r.get("warmup")) for lines in by_rank.values()]
    return round(max(waits) / seconds, 4) if seconds and waits else None


def _losses(by_rank: Mapping[int, list[dict[str, Any]]], evals: list[dict[str, Any]], target: Any,
            tokens_per_sequence: float) -> dict[str, Any]:
    """Training loss (rank 0's lines), the validation losses, and the first validation at or under ``target``."""
    train = [(r["step"], _number(r.get("loss"))) for r in by_rank.get(0, []) if isinstance(r.get("step"), int)]
    vals = sorted((e for e in evals if _number(e.get("val_loss")) is not None and isinstance(e.get("step"), int)),
                  key=lambda e: e["step"])
    target = _number(target)
    hit = next((e for e in vals if target is not None and e["val_loss"] <= target), None)
    return {"first_loss": train[0][1] if train else None, "final_loss": train[-1][1] if train else None,
            "val_losses": [{k: e.get(k) for k in ("step", "tokens", "val_loss", "elapsed_s")} for e in vals],
            F.FINAL_VAL_LOSS: vals[-1]["val_loss"] if vals else None, "target_loss": target,
            F.TOKENS_TO_TARGET: hit.get("tokens") if hit else None,
            F.TIME_TO_TARGET_LOSS_S: hit.get("elapsed_s") if hit else None}
