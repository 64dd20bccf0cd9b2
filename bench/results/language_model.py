"""A language model's figures as columns of a run's row (``results.load``) and of ``bench status``.

The summary's ``language_model`` block (``workloads.train.harness.language_model_summary``) read field by field (a
wrong type reads as missing), and what the block cannot know: dollars per billion tokens, the run's on-demand price
over its token rate (``core.catalog.llm.usd_per_billion_tokens``, the price ``usd_per_1k_samples`` is made of), and
energy per token, the nodes' mean power over the token rate (as ``joules_per_sample`` is over the sample rate,
``bench.results.hardware``). Every column is None for a run that trained no language model. Pure.
"""

from __future__ import annotations

from typing import Any, Mapping

import bench.results.readers as R
from bench.results.hardware import JOULES_PER_KWH
from core.catalog.llm import usd_per_billion_tokens
from core.contract import summary_fields as F

# Columns read from the block, in the frame's order, each checked as the reader checks it (readers.LANGUAGE_MODEL)
BLOCK = (F.TOKENS_PER_S, F.TOKENS_PER_S_PER_DEVICE, F.FLOPS_PER_TOKEN, "tflops_per_s_per_gpu", "mfu_fp8_peak",
         "mfu_convention", "final_loss", F.FINAL_VAL_LOSS, "target_loss", F.TOKENS_TO_TARGET, F.TIME_TO_TARGET_LOSS_S,
         "model_size", "parameters", "seq_len", "tensor_parallel", "data_parallel", "sharding",
         "activation_checkpoint", "fp8_recipe")
DERIVED = ("usd_per_billion_tokens", "joules_per_token", "kwh_per_billion_tokens")
COLUMNS = (*BLOCK, "val_losses", *DERIVED)
MEASURES = (F.TOKENS_PER_S, F.TOKENS_PER_S_PER_DEVICE, F.FLOPS_PER_TOKEN, "tflops_per_s_per_gpu", "mfu_fp8_peak",
            "final_loss", F.FINAL_VAL_LOSS, "target_loss", F.TOKENS_TO_TARGET, F.TIME_TO_TARGET_LOSS_S, *DERIVED)
COUNTS = ("parameters", "seq_len", "tensor_parallel", "data_parallel")


def block(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary's ``language_model`` block; {} where it has none (not a language model, or not a dict)."""
    got = summary.get(F.LANGUAGE_MODEL)
    return got if isinstance(got, dict) else {}


def language_model_columns(summary: Mapping[str, Any], *, hourly: float | None,
                           power_mean_w: float | None) -> dict[str, Any]:
    """The row's language-model columns (``COLUMNS``): the block's figures, the validation losses as a list of
    ``{step, tokens, val_loss, elapsed_s}``, and per billion tokens, dollars at ``hourly`` (all the run's
    instances, None where unpriced) and energy at ``power_mean_w`` (all the run's GPUs, None where not measured;
    a negative power is no measurement: ``bench.results.hardware`` says so)."""
    lm = block(summary)
    out: dict[str, Any] = {k: lm[k] if lm.get(k) is not None and R.LANGUAGE_MODEL[k](lm[k]) else None
                           for k in BLOCK}
    vals = lm.get("val_losses")
    out["val_losses"] = [v for v in vals if R.val_loss(v)] if lm and isinstance(vals, list) else None
    rate = out[F.TOKENS_PER_S]
    power = power_mean_w if R.number(power_mean_w) and power_mean_w >= 0 else None
    joules = power / rate if power is not None and rate else None
    out.update(usd_per_billion_tokens=round(usd_per_billion_tokens(hourly, rate), 4) if hourly and rate else None,
               joules_per_token=round(joules, 9) if joules is not None else None,
               kwh_per_billion_tokens=round(joules * 1e9 / JOULES_PER_KWH, 6) if joules is not None else None)
    return out


def block_figure(summary: Mapping[str, Any], key: str) -> float | None:
    """A share the block has where the summary's top level may not: its ``mfu`` (against the bf16 peak for float8:
    ``mfu_convention`` says which) or its ``data_wait_share``; None where it has none, or one below zero."""
    value = block(summary).get(key)
    return value if value is not None and R.non_negative(value) else None


def is_language_model(row: Mapping[str, Any]) -> bool:
    """Whether a row (``results.load``'s, or ``bench status``'s) is of a run that trained a language model."""
    def known(v: Any) -> bool:
        return v is not None and v == v  # not None, not NaN
    return known(row.get("model_size")) or known(row.get(F.TOKENS_PER_S))


def gpu_model(row: Mapping[str, Any]) -> str | None:
    """The GPU model a row ran on, as the catalogs name it (``H100``): its instance type's, else its device name's;
    None for a CPU run or a GPU the catalogs do not know."""
    from core.catalog import aws as catalog
    from core.catalog.peaks import gpu_model as from_device

    it = row.get("instance_type")
    found = catalog.INSTANCE_TYPES.get(it) if isinstance(it, str) else None
    if found and found.gpu_model:
        return found.gpu_model
    device = row.get("gpu")
    return from_device(device) if isinstance(device, str) and device != "cpu" else None
