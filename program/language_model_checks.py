"""Meaning rules of a language-model experiment (llama3) and of its keys elsewhere: each refusal names the key, quotes
the value, states the rule and gives an example.

- The language-model keys (``model_size``, ``seq_len``, ``tensor_parallel``, ``sharding``, ``activation_checkpoint``,
  ``fp8_recipe``, ``val_every``, ``target_loss``) set to anything but their defaults on another workload: they would
  be ignored there. (Which framework runs llama3 is ``workloads.framework_support``'s rule.)
- ``precision: fp8`` is torchao's float8 training of a language model's linear layers: llama3 only, and only on GPUs
  with float8 tensor cores. torchao's ``Float8Linear`` multiplies with ``torch._scaled_mm``, which PyTorch allows only
  "on CUDA devices with compute capability >= 9.0 or 8.9" (aten/src/ATen/native/cuda/Blas.cpp); torchao's docs give
  the same floor ("Requires CUDA >=8.9", docs/source/workflows/inference.md; "H100 SM89 or SM90+",
  contributor_guide.rst; read at pytorch/ao 36027d8). On AWS that is the H100 and H200 (9.0, p5, p5e) and the L4 and
  L40S (8.9, g6, g6e): the GPUs ``core.catalog.peaks`` gives an fp8 peak. TorchTitan documents float8 on H100s only.
- ``tensor_parallel`` must divide the GPUs of a node (the TP group lives within one) and the model's heads and KV heads
  (each rank computes whole heads); ``seq_len`` must be a multiple of it (sequence parallelism splits each sequence).
- ``sharding: hsdp`` replicates across nodes and shards within one: it needs two nodes or more.
- The data: ``val_every`` and ``target_loss`` need held-out text (none in synthetic tokens); a dataset's token ids
  must fit the model's embedding (tiny and debug cannot read Llama 3's 128,256 ids); and a language model compiles
  in the default mode only.
- The memory estimate (``program.language_model_estimate``) must fit the node group's GPU. This one judges the
  cluster's node group only (``memory_problems``, called where ``program.validation`` judges for the cluster): a
  local run trains its ``local:`` shape on this machine.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from math import gcd

from core.catalog import aws as catalog
from core.catalog.llm import BYTE_VOCAB, LLAMA3_VOCAB, MODELS
from core.catalog.llm_memory import GIB
from core.catalog.peaks import NO_BF16, PEAK_TFLOPS
from core.config.fields import problem, show
from core.config.model import Experiment, GpuNodeGroup, StackConfig
from datasets.catalog import DATASET_NAMES, dataset
from program.language_model_estimate import experiment_memory, is_language_model, seq_len_of

LANGUAGE_MODEL_KEYS = ("model_size", "seq_len", "tensor_parallel", "sharding", "activation_checkpoint",
                       "fp8_recipe", "val_every", "target_loss")
FP8_SOURCE = ("torchao's float8 runs torch._scaled_mm, which needs compute capability 8.9 or later "
              "(PyTorch's check; torchao's docs)")
MOST_NODES_SUGGESTED = 64  # the most nodes a memory refusal tries before it says no node count alone fits


def fp8_gpus() -> tuple[str, ...]:
    """The GPU models with float8 tensor cores (compute capability 8.9 or later): those with an fp8 peak."""
    return tuple(m for m, p in PEAK_TFLOPS.items() if p.get("fp8"))


def language_model_problems(key: str, e: Experiment, group: GpuNodeGroup | None) -> list[str]:
    """The rules of the module but memory, for ``e`` (``key``: its stack-file key) on ``group`` (None: not found)."""
    if not is_language_model(e):
        return _stray_keys(key, e)
    out = []
    gpu = catalog.INSTANCE_TYPES[group.instance_type].gpu_model if group is not None else None
    if e.precision == "fp8" and gpu is not None and gpu not in fp8_gpus():
        instead = "amp-fp16" if gpu in NO_BF16 else "bf16"
        out.append(problem(f"{key}.precision", e.precision, f"{gpu} GPUs ({group.instance_type}, node group "
                           f"{group.name!r}) have no float8 tensor cores: {FP8_SOURCE}; on AWS: "
                           f"{', '.join(fp8_gpus())}; use {instead} there", show(instead)))
    out += _tensor_parallel(key, e) + _data(key, e)
    if e.sharding == "hsdp" and e.min_nodes < 2:
        out.append(problem(f"{key}.sharding", e.sharding, f"HSDP replicates the model across nodes and shards it "
                           f"within one, and this experiment has {e.min_nodes} node; use fsdp, or nodes >= 2",
                           show("fsdp")))
    return out


def _stray_keys(key: str, e: Experiment) -> list[str]:
    """A language model's keys, and precision fp8, on another workload."""
    defaults = {f.name: f.default for f in fields(Experiment) if f.default is not MISSING}
    out = [problem(f"{key}.{k}", getattr(e, k), f"is a language model's key (workload llama3) and workload "
                   f"{e.workload!r} has no language model; remove it", 'workload: "llama3"')
           for k in LANGUAGE_MODEL_KEYS if getattr(e, k) != defaults[k]]
    if e.precision == "fp8":
        out.append(problem(f"{key}.precision", e.precision, f"float8 (torchao) trains a language model's linear layers "
                           f"(workload llama3) only; {e.workload} trains in fp32, amp-fp16 or bf16", show("amp-fp16")))
    return out


# The ids each tokenizer of a token-shards dataset (datasets.catalog TokenSource.tokenizer) writes
TOKENIZER_VOCAB = {"bytes": BYTE_VOCAB, "llama3": LLAMA3_VOCAB}


def _data(key: str, e: Experiment) -> list[str]:
    """What the data must give the keys: held-out text for a validation loss, token ids the model's embedding has;
    and the one compile mode a language model uses."""
    out = []
    if e.dataset == "synthetic":
        out += [problem(f"{key}.{k}", getattr(e, k), "needs held-out text, and synthetic tokens have none (no "
                        "validation loss is ever measured on them); use a dataset of token shards, or remove it",
                        'dataset: "fineweb-edu-10bt-sample"')
                for k in ("val_every", "target_loss") if getattr(e, k) not in (0, None)]
    elif e.dataset in DATASET_NAMES and (source := dataset(e.dataset).tokens) is not None:
        ids, vocab = TOKENIZER_VOCAB[source.tokenizer], MODELS[e.model_size].vocab_size
        if vocab < ids:
            out.append(problem(f"{key}.model_size", e.model_size, f"embeds {vocab:,} token ids and {e.dataset} is "
                               f"tokenized into {ids:,} ({source.tokenizer}): its ids past the embedding would fail "
                               "every rank at the first batch; use a model of Llama 3's vocabulary, or dataset "
                               "text-bytes", show("8b")))
    if e.compile_mode != "default":
        out.append(problem(f"{key}.compile_mode", e.compile_mode, "a language model compiles each block in the "
                           "default mode, as TorchTitan does; compile_mode chooses for the image workloads",
                           show("default")))
    return out


def _tensor_parallel(key: str, e: Experiment) -> list[str]:
    """tensor_parallel divides the node's GPUs and the model's heads; seq_len is a multiple of it."""
    shape, tp, out = MODELS[e.model_size], e.tensor_parallel, []
    whole = gcd(gcd(e.gpus_per_node, shape.n_heads), shape.n_kv_heads)
    if whole % tp:
        best = max(d for d in range(1, whole + 1) if whole % d == 0 and d <= tp)
        out.append(problem(f"{key}.tensor_parallel", tp, f"must divide gpus_per_node ({e.gpus_per_node}) and the "
                           f"{e.model_size.upper()} model's {shape.n_heads} heads and {shape.n_kv_heads} KV heads: a "
                           f"TP group is within one node and each of its GPUs computes whole heads", str(best)))
        return out  # the sequence's rule follows a degree that can run
    seq = seq_len_of(e)
    if seq % tp:
        fixed = seq - seq % tp or tp
        out.append(problem(f"{key}.seq_len", seq, f"must be a multiple of tensor_parallel ({tp}): sequence "
                           f"parallelism splits each sequence among the TP group's GPUs", str(fixed)))
    return out


def memory_problems(cfg: StackConfig) -> list[str]:
    """Each language-model experiment's memory estimate within its node group's GPU memory (the cluster's groups
    only: ``program.validation`` calls this for the cluster, never for a local run)."""
    out = []
    for i, e in enumerate(cfg.experiments):
        group = cfg.node_groups.get(e.node_group)
        if is_language_model(e) and group is not None and not _problem_of_its_own(e):
            out += _memory_problem(cfg.experiment_key(i), e, group)
    return out


def _memory_problem(key: str, e: Experiment, group: GpuNodeGroup) -> list[str]:
    """``e``'s refusal where its estimate exceeds its GPU's memory, with the figures and what would fit; else none."""
    memory = experiment_memory(e, group.instance_type)
    if memory.fits is not False:
        return []
    gpu = catalog.INSTANCE_TYPES[group.instance_type].gpu_model
    asked = (f"nodes {e.min_nodes}, batch_size {e.batch_size}, seq_len {seq_len_of(e)}, tensor_parallel "
             f"{e.tensor_parallel}, sharding {e.sharding}, activation_checkpoint {e.activation_checkpoint}, "
             f"precision {e.precision}")
    fixes = suggestions(e, group.instance_type)
    fix = (f"it fits with {' or '.join(fixes)}" if fixes else f"no change of nodes (up to {MOST_NODES_SUGGESTED}), "
           "tensor_parallel, activation_checkpoint or batch_size fits it; a GPU with more memory or a smaller "
           "model_size does")
    return [problem(f"{key}.model_size", e.model_size,
                    f"needs about {memory.total / GIB:.1f} GiB a GPU, more than each {gpu}'s "
                    f"{memory.capacity / GIB:.0f} GiB ({group.instance_type}, node group {group.name!r}) at {asked} "
                    f"({memory.parts()}; an estimate, core/catalog/llm_memory.py); {fix}",
                    fixes[0] if fixes else show("1b"))]


def _problem_of_its_own(e: Experiment) -> bool:
    """Whether another rule refuses ``e``'s parallelism already (an estimate of it would mean nothing)."""
    return bool(_tensor_parallel("", e)) or (e.sharding == "hsdp" and e.min_nodes < 2)


def suggestions(e: Experiment, instance_type: str) -> list[str]:
    """The changes that make ``e`` fit its GPU, as stack-file text: each single one that does (more nodes, the fewest
    that fit, as FSDP shards the state over more GPUs; full activation checkpointing; a wider tensor_parallel; a
    smaller batch), else full checkpointing with the fewest nodes that then fit; empty where none does."""
    out = []
    if e.sharding == "fsdp":
        nodes = _fewest_nodes(e, instance_type)
        out += [f"nodes: {nodes}"] if nodes else []
    if e.activation_checkpoint != "full" and experiment_memory(e, instance_type, activation_checkpoint="full").fits:
        out.append("activation_checkpoint: full")
    shape = MODELS[e.model_size]
    whole = gcd(gcd(e.gpus_per_node, shape.n_heads), shape.n_kv_heads)
    wider = [d for d in range(e.tensor_parallel + 1, whole + 1) if whole % d == 0 and seq_len_of(e) % d == 0
             and experiment_memory(e, instance_type, tp=d).fits]
    out += [f"tensor_parallel: {wider[0]}"] if wider else []
    smaller = [b for b in range(e.batch_size - 1, 0, -1) if experiment_memory(e, instance_type, batch=b).fits]
    out += [f"batch_size: {smaller[0]}"] if smaller else []
    if not out and e.sharding == "fsdp" and e.activation_checkpoint != "full":
        nodes = _fewest_nodes(e, instance_type, activation_checkpoint="full")
        out += [f"activation_checkpoint: full and nodes: {nodes}"] if nodes else []
    return out


def _fewest_nodes(e: Experiment, instance_type: str, **changed: str) -> int | None:
    """The fewest nodes, more than ``e``'s and at most ``MOST_NODES_SUGGESTED``, at which ``e`` (with ``changed``)
    fits its GPU; None where none does."""
    return next((n for n in range(e.min_nodes + 1, MOST_NODES_SUGGESTED + 1)
                 if experiment_memory(e, instance_type, nodes=n, **changed).fits), None)
