"""What a language-model experiment (llama3) asks of its GPUs and what it may cost, before anything runs: its model's
parameters and FLOPs per token (``core.catalog.llm``), one GPU's memory estimate against the GPU's memory
(``core.catalog.llm_memory``), and the tokens/s per GPU and cost of a billion tokens from the nearest published
figure of the same GPU (``core.catalog.llm_anchors``), at the stack region's on-demand price (``core.catalog.aws``).

``program.offline`` puts the rows in the plan's estimate (``bench plan`` prints them); ``program.language_model_checks``
refuses an experiment whose memory estimate exceeds its GPU's. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from core.catalog import aws as catalog
from core.catalog.llm import MODELS, usd_per_billion_tokens
from core.catalog.llm_anchors import LlmAnchor, anchor_mfu, nearest_anchor, published_precisions
from core.catalog.llm_memory import MemoryEstimate, gpu_memory_bytes, memory_per_gpu
from core.catalog.workload_facts import WORKLOADS
from core.config.gpu_defaults import compile_choice
from core.config.model import Experiment, StackConfig

MEMORY_SOURCE = "an estimate of core/catalog/llm_memory.py"


def is_language_model(e: Experiment) -> bool:
    facts = WORKLOADS.get(e.workload)
    return facts is not None and facts.language_model


def seq_len_of(e: Experiment) -> int:
    """The experiment's tokens per sequence: ``seq_len``, else its model's default."""
    return e.seq_len or MODELS[e.model_size].default_seq_len


def experiment_memory(e: Experiment, instance_type: str | None, **changed: Any) -> MemoryEstimate:
    """One GPU's memory estimate for ``e`` on ``instance_type``'s GPUs, at its fewest nodes (an elastic run's worst
    case); ``changed``: ``nodes``, ``tp``, ``activation_checkpoint`` or ``batch`` instead of the experiment's (what
    a refusal suggests)."""
    asked = dict(nodes=e.min_nodes, tp=e.tensor_parallel, activation_checkpoint=e.activation_checkpoint,
                 batch=e.batch_size)
    asked.update(changed)
    return memory_per_gpu(MODELS[e.model_size], seq_len=seq_len_of(e), gpus_per_node=e.gpus_per_node,
                          sharding=e.sharding, precision=e.precision, capacity=gpu_memory_bytes(instance_type), **asked)


def experiment_anchor(e: Experiment, instance_type: str) -> LlmAnchor | None:
    """The published figure nearest ``e`` on its own GPU model (compiled as ``e`` would be), or None."""
    gpu = catalog.INSTANCE_TYPES[instance_type].gpu_model or None
    compiled = bool(compile_choice(e, gpu=True, instance_type=instance_type).value)
    return nearest_anchor(e.model_size, gpu, e.precision, e.max_nodes * e.gpus_per_node, compiled)


def no_anchor(e: Experiment, gpu: str) -> str:
    """The sentence for an experiment with no published figure on its GPU."""
    others = published_precisions(e.model_size, gpu)
    but = f" (published there: {', '.join(others)})" if others else ""
    return f"no published figure for {gpu} in {e.model_size.upper()} {e.precision}{but}"


def language_model_rows(cfg: StackConfig) -> list[dict[str, Any]]:
    """Per language-model experiment, the plan's row (see the module); none for other workloads."""
    return [_row(cfg, e) for e in cfg.experiments if is_language_model(e)]


def _row(cfg: StackConfig, e: Experiment) -> dict[str, Any]:
    group = cfg.node_group_for(e)
    gpu = catalog.INSTANCE_TYPES[group.instance_type].gpu_model
    shape, seq = MODELS[e.model_size], seq_len_of(e)
    memory = experiment_memory(e, group.instance_type)
    anchor = experiment_anchor(e, group.instance_type)
    nodes, gpus = e.max_nodes, e.max_nodes * e.gpus_per_node
    price = catalog.usd_per_hour(group.instance_type, cfg.region)
    rate = anchor.tokens_per_s_per_gpu if anchor else None
    usd = usd_per_billion_tokens(price * nodes, rate * gpus) if rate and price is not None else None
    return {
        "experiment": e.label, "model_size": e.model_size, "parameters": shape.parameters,
        "flops_per_token": shape.flops_per_token(seq), "seq_len": seq, "nodes": nodes, "gpus": gpus,
        "instance_type": group.instance_type, "gpu_model": gpu, "precision": e.precision, "region": cfg.region,
        "memory_per_gpu_bytes": memory.total, "gpu_memory_bytes": memory.capacity, "memory_fits": memory.fits,
        "memory_text": memory.text(), "memory_source": MEMORY_SOURCE,
        "tokens_per_s_per_gpu_estimate": rate, "usd_per_billion_tokens_estimate": usd,
        "anchor": None if anchor is None else {"label": anchor.label, "source": anchor.where,
                                               "system": anchor.system, "seq_len": anchor.seq_len,
                                               "mfu": round(anchor_mfu(anchor), 4), "caveats": anchor.caveats},
        "estimate_note": _note(e, anchor, gpu, price, group.instance_type, cfg.region),
    }


def _note(e: Experiment, anchor: LlmAnchor | None, gpu: str, price: float | None, instance_type: str,
          region: str | None) -> str:
    """Where the estimate comes from: the figure it takes, or why there is none; and a missing price."""
    if anchor is None:
        return no_anchor(e, gpu)
    seq = f" (published at seq {anchor.seq_len:,})" if anchor.seq_len != seq_len_of(e) else ""
    unpriced = f"; {catalog.no_price(instance_type, region)}" if price is None else ""
    return f"from {anchor.label}{seq}{unpriced}"
