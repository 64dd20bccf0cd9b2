"""The report's language-model section: each run's tokens/s per GPU, MFU, TFLOP/s, step times, data wait, memory,
dollars and energy per billion tokens, beside the nearest published figure of the same GPU, model and precision
(``core.catalog.llm_anchors``) as a ratio with its source and caveats; the loss curves (training loss by step,
validation loss by tokens); and, for a sweep over nodes, the scaling efficiency beside the anchors' own.

Rows and words here; the figures in ``bench.report.language_model_plot``. Beside ``bench.report.page``, which calls
``language_model_section`` with its own ``figure`` and ``table``, as the scaling and hardware sections are.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from bench.report.blocks import empty_section, esc
from bench.results.language_model import gpu_model, is_language_model

GIB = 2**30
TITLE = "Language model"
NONE = ("no run trained a language model (workload: llama3); a language model's page shows tokens/s per GPU, MFU "
        "and dollars per billion tokens beside the published figures.")
RUN_COLUMNS = [("experiment", "experiment"), ("model", "model"), ("gpus", "GPUs"), ("precision", "precision"),
               ("tokens_per_gpu", "tokens/s per GPU"), ("mfu", "MFU"), ("tflops", "TFLOP/s per GPU"),
               ("step_p50", "step p50 s"), ("step_p95", "step p95 s"), ("data_wait", "waiting for data"),
               ("memory", "peak memory GiB"), ("usd", "USD per billion tokens (estimate)"),
               ("energy", "kWh per billion tokens"), ("val_loss", "last val loss"), ("to_target", "to target loss")]
ANCHOR_COLUMNS = [("experiment", "experiment"), ("anchor", "nearest published figure"),
                  ("anchor_tokens", "its tokens/s per GPU"), ("vs_tokens", "× anchor (tokens/s per GPU)"),
                  ("our_mfu", "our MFU (its convention)"), ("anchor_mfu", "its MFU"), ("vs_mfu", "× anchor (MFU)"),
                  ("source", "source"), ("caveats", "caveats")]
INTRO = ("Tokens/s per GPU are the steady sequences/s × tokens per sequence, per GPU. MFU is achieved model FLOP/s "
         "per GPU (6 × (N − N_embedding) + 12 × L × d × T FLOPs per token, recomputation not counted) over the GPU's "
         "dense peak: a float8 run's against the bf16 peak, as TorchTitan and AWS give it, and against the fp8 peak, "
         "as NVIDIA gives it, each labelled. Dollars per billion tokens: the instances' on-demand price in the run's "
         "region over its token rate (an estimate, not a bill); energy per billion tokens: the GPUs' mean power "
         "over it, where the run measured power.")
ANCHOR_INTRO = ("Each run beside the published figure nearest to it: the same GPU, model and precision (never another "
                "GPU's), software like ours (TorchTitan's FSDP2) before NVIDIA's NeMo, compiled as the run was, then "
                "the GPU count nearest. × anchor is ours over theirs; the MFU ratio compares the same convention and "
                "allows for another sequence length. Read each with its caveats: a published figure is its "
                "publisher's best run on its own hardware.")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _whole(v: Any) -> int | None:
    """A rate shown to the unit (the page writes 4 significant digits of a float: 1.025e+04)."""
    return int(round(v)) if _num(v) is not None else None


def gpus(r: Mapping[str, Any]) -> int | None:
    """The run's GPUs: its world size (one process a GPU), else nodes × GPUs per node."""
    world, nodes, per = (_num(r.get(k)) for k in ("world_size", "nodes", "gpus_per_node"))
    return int(world) if world else int(nodes * per) if nodes and per else None


def mfu_text(r: Mapping[str, Any]) -> str | None:
    """``35.1%``; a float8 run's against both peaks: ``46.8% (bf16 peak) / 23.4% (fp8 peak)``."""
    mfu, fp8 = _num(r.get("mfu")), _num(r.get("mfu_fp8_peak"))
    if r.get("precision") == "fp8" and (mfu is not None or fp8 is not None):
        return " / ".join(t for t in (f"{mfu:.1%} (bf16 peak)" if mfu is not None else None,
                                      f"{fp8:.1%} (fp8 peak)" if fp8 is not None else None) if t)
    return f"{mfu:.1%}" if mfu is not None else None


def _memory(r: Mapping[str, Any]) -> float | None:
    """The most memory one GPU held: the trainer's peak allocated, else the telemetry's fullest GPU."""
    device = r.get("device") if isinstance(r.get("device"), Mapping) else {}
    gib = _num(device.get("peak_memory_gib"))
    peak = _num(r.get("memory_peak_bytes"))
    return round(gib, 2) if gib is not None else round(peak / GIB, 2) if peak is not None else None


def parameters_text(n: float) -> str:
    """8.03 B, 1.24 B, 435 K: a model's parameters at the scale a reader names them."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"


def _model(r: Mapping[str, Any]) -> str:
    params = _num(r.get("parameters"))
    seq = _num(r.get("seq_len"))
    return (f"{str(r.get('model_size')).upper()}" + (f" ({parameters_text(params)} parameters)" if params else "")
            + (f", seq {int(seq):,}" if seq else "") + (f", TP {int(r['tensor_parallel'])}"
                                                        if (_num(r.get("tensor_parallel")) or 1) > 1 else ""))


def _to_target(r: Mapping[str, Any]) -> str | None:
    target, tokens, secs = (_num(r.get(k)) for k in ("target_loss", "tokens_to_target_loss", "time_to_target_loss_s"))
    if target is None:
        return None
    if tokens is None:
        return f"{target:g}: not reached"
    return f"{target:g}: {tokens / 1e9:.3g} B tokens" + (f", {secs:,.0f} s" if secs is not None else "")


def run_row(r: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One run's row of the section's first table (``RUN_COLUMNS``)."""
    share = _num(r.get("data_wait_share"))
    precision = str(r.get("precision")) + (f" ({r['fp8_recipe']})" if r.get("fp8_recipe") else "")
    tflops = _num(r.get("tflops_per_s_per_gpu"))
    return {"experiment": name, "model": _model(r), "precision": precision,
            "gpus": (f"{gpus(r)} × {gpu_model(r) or r.get('gpu') or '?'}" if gpus(r) else None),
            "tokens_per_gpu": _whole(r.get("tokens_per_s_per_device")), "mfu": mfu_text(r),
            "tflops": round(tflops, 1) if tflops is not None else None,
            "step_p50": _num(r.get("step_time_p50_s")), "step_p95": _num(r.get("step_time_p95_s")),
            "data_wait": f"{share:.0%}" if share is not None else None, "memory": _memory(r),
            "usd": _num(r.get("usd_per_billion_tokens")), "energy": _num(r.get("kwh_per_billion_tokens")),
            "val_loss": _num(r.get("final_val_loss")), "to_target": _to_target(r), "status": r.get("status")}


def _compiled(r: Mapping[str, Any]) -> bool | None:
    config = r.get("config") if isinstance(r.get("config"), Mapping) else {}
    return config.get("compile") if isinstance(config.get("compile"), bool) else None


def anchor_for(r: Mapping[str, Any]):
    """The nearest published figure of the run's GPU, model and precision (``nearest_anchor``), None where none."""
    from core.catalog.llm_anchors import nearest_anchor

    size, model, n = r.get("model_size"), gpu_model(r), gpus(r)
    if not isinstance(size, str) or not model or not n or not isinstance(r.get("precision"), str):
        return None
    return nearest_anchor(size, model, r["precision"], n, compiled=_compiled(r))


def _caveats(r: Mapping[str, Any], anchor) -> str:
    """The anchor's caveats, then what differs between it and the run: GPU count, sequence length, compile."""
    own = [anchor.caveats, f"{anchor.system}; {anchor.parallelism}"]
    n, seq = gpus(r), _num(r.get("seq_len"))
    if n and n != anchor.gpus:
        own.append(f"measured on {anchor.gpus} GPUs, this run on {n}")
    if seq and int(seq) != anchor.seq_len:
        own.append(f"sequence length {anchor.seq_len:,}, this run's {int(seq):,}: tokens/s differ with it, MFU less")
    if _compiled(r) is not None and _compiled(r) != anchor.compiled:
        own.append("compiled" if anchor.compiled else "not compiled (eager)")
    return "; ".join(own)


def anchor_row(r: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One run beside its nearest published figure (``ANCHOR_COLUMNS``): ratios ours / theirs."""
    from core.catalog.llm_anchors import anchor_mfu, published_precisions

    anchor = anchor_for(r)
    if anchor is None:
        others = published_precisions(str(r.get("model_size")), gpu_model(r))
        why = (f"none published for {str(r.get('model_size')).upper()} on {gpu_model(r) or 'this GPU'} in "
               f"{r.get('precision')}" + (f" (published: {', '.join(others)})" if others else ""))
        return {"experiment": name, "anchor": why}
    tokens = _num(r.get("tokens_per_s_per_device"))
    ours = _num(r.get("mfu_fp8_peak") if anchor.mfu_peak == "fp8" else r.get("mfu"))
    theirs = anchor_mfu(anchor)
    published = f" (published {anchor.published_mfu:.1%})" if anchor.published_mfu is not None else ""
    return {"experiment": name, "anchor": anchor.label, "anchor_tokens": round(anchor.tokens_per_s_per_gpu),
            "vs_tokens": round(tokens / anchor.tokens_per_s_per_gpu, 3) if tokens else None,
            "our_mfu": f"{ours:.1%} ({anchor.mfu_peak} peak)" if ours is not None else None,
            "anchor_mfu": f"{theirs:.1%} ({anchor.mfu_peak} peak){published}",
            "vs_mfu": round(ours / theirs, 3) if ours is not None else None,
            "source": anchor.where, "caveats": _caveats(r, anchor)}


def language_model_section(df, steps, *, figure: Callable[..., str], table: Callable[..., str]) -> str:
    """The section, or its one line where no run trained a language model."""
    from bench.report.figures import labels
    from bench.report.language_model_plot import loss_figure

    named = [(r, name) for r, name in zip(_records(df), labels(df)) if is_language_model(r)]
    if not named:
        return empty_section(TITLE, NONE)
    runs = [run_row(r, name) for r, name in named]
    anchors = [anchor_row(r, name) for r, name in named if r.get("status") == "succeeded"]
    return (f"<h2>{TITLE}</h2><p>{esc(INTRO)}</p>" + table(runs, RUN_COLUMNS)
            + (f"<h3>Beside the published figures</h3><p>{esc(ANCHOR_INTRO)}</p>" + table(anchors, ANCHOR_COLUMNS)
               if anchors else "")
            + "<h3>Loss</h3><p>Training loss by step (the mean over ranks) and validation loss by tokens trained, "
              "with the target loss where the experiment set one.</p>"
            + figure(loss_figure(steps, df), "language model loss curves", "No loss was logged.")
            + scaling_part(df, figure=figure, table=table))


def scaling_part(df, *, figure: Callable[..., str], table: Callable[..., str]) -> str:
    """Scaling efficiency of each node sweep of one model and precision, beside the anchors' at their GPU counts."""
    from bench.report.language_model_plot import SCALING_COLUMNS, anchor_scaling, scaling_figure, scaling_table

    ours = scaling_table(df)
    if ours.empty:
        return ("<p class='note'>Scaling: one size per model and precision; run a sweep over nodes "
                "(nodes: [1, 2, 4]) for its efficiency beside the published figures'.</p>")
    theirs = anchor_scaling(ours)
    cols = [("series", "anchor series"), ("gpus", "GPUs"), ("tokens_per_gpu", "tokens/s per GPU"),
            ("efficiency", "efficiency")]
    return ("<h3>Scaling efficiency in tokens</h3><p>efficiency(N) = tokens/s per GPU at N nodes / at the fewest nodes "
            "measured (weak scaling: the same sequences per GPU at every size, as every anchor measures); beside "
            "it, each published series of the same GPU, model and precision at its own GPU counts, against its "
            "fewest.</p>" + figure(scaling_figure(ours, theirs), "language model scaling efficiency", "")
            + table(ours, SCALING_COLUMNS)
            + (table(theirs, cols) if not theirs.empty else
               "<p class='note'>No published series of two or more sizes for this GPU, model and precision.</p>"))


def _records(df) -> list[dict[str, Any]]:
    """The frame's rows as dicts, None (not NaN) where missing."""
    return [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in df.to_dict("records")]
