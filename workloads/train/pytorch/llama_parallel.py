"""How the Llama model (``llama``) is parallelised: the device mesh, then TorchTitan's fixed order.

``parallelize`` follows pytorch/torchtitan ``torchtitan/models/llama3/infra/parallelize.py``
(``parallelize_llama``): float8 conversion first (TorchTitan's model converters run before it), then tensor
parallelism with sequence parallelism (``apply_tp``), then activation checkpointing (``apply_ac``, from
``torchtitan/distributed/activation_checkpoint.py``), then ``torch.compile`` per block (``apply_compile``), then
FSDP2 per block and on the root (``apply_fsdp``; HSDP on a 2-D data-parallel mesh). One simplification: the
embedding and the final norm and output are sharded with the root rather than in groups of their
own (which also keeps a tied embedding and output in one group). Under tensor parallelism the loss is parallel, as
TorchTitan's: the output layer's logits stay sharded over the vocabulary (``Shard(-1)``) and the loss and its
backward run inside ``loss_context``.

Without a data-parallel dimension (one process, or tensor parallelism alone) FSDP is not applied, as in
TorchTitan, so bf16 then comes from autocast in the trainer (``autocast_dtype``), as TorchTitan's
``maybe_enable_amp`` does. Everything here runs on a CPU with gloo too, fp8 aside.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import defaultdict
from typing import Any

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from core.catalog.pins import FLOAT8_MODULE, PIP_PINS
from core.contract.train_args import ACTIVATION_CHECKPOINTS, FP8_RECIPES, SHARDINGS

PRECISIONS = ("fp32", "bf16", "fp8")  # what parallelize takes: amp-fp16 trains fp32 weights under autocast
TORCHAO_PIN = PIP_PINS[FLOAT8_MODULE]  # what the pods pip-install for precision fp8 (core/catalog/pins.py)
FP8_MIN_CAPABILITY = (8, 9)  # float8 tensor cores: Ada (8.9) and Hopper (9.0) on; A100 is 8.0


def device_mesh(world: int, tp: int, local_world: int, sharding: str, device_type: str) -> DeviceMesh | None:
    """The mesh of ``world`` ranks, ``local_world`` to a node, tensor parallel ``tp`` wide.

    Dimensions, outermost first: ``("dp_shard",)`` for FSDP, ``("dp_replicate", "dp_shard")`` for HSDP
    (replicate across nodes, shard within one), then ``"tp"`` where ``tp > 1``. ``tp`` divides ``local_world``:
    tensor parallelism stays inside a node, and as the innermost dimension its ranks are consecutive (``rank //
    tp`` is the data-parallel rank). One process with ``tp == 1`` has no mesh (``None``). Needs the default
    process group already initialised (nccl on GPUs, gloo on CPUs).
    """
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding {sharding!r} is not one of {', '.join(SHARDINGS)}")
    if tp < 1 or local_world < 1 or local_world % tp or world % local_world:
        raise ValueError(f"tensor parallel {tp} must divide the {local_world} processes of a node, and those the "
                         f"{world} processes of the run: tensor parallelism stays inside a node")
    if world == 1 and tp == 1:
        return None
    if sharding == "hsdp":
        shape, names = (world // local_world, local_world // tp), ("dp_replicate", "dp_shard")
    else:
        shape, names = (world // tp,), ("dp_shard",)
    if tp > 1:
        shape, names = (*shape, tp), (*names, "tp")
    return init_device_mesh(device_type, shape, mesh_dim_names=names)


def parallelize(model: nn.Module, mesh: DeviceMesh | None, *, tp: int, activation_checkpoint: str, compile: bool,
                precision: str, fp8_recipe: str = "tensorwise", reshard_after_forward: bool = True,
                loss_parallel: bool = True) -> nn.Module:
    """``model`` (a ``llama.Llama``, initialised, or on the meta device to be given storage and initialised after) made
    ready to train on ``mesh``, in TorchTitan's order: fp8,
    tensor parallel, activation checkpointing, compile, FSDP. Changes ``model`` in place and returns it."""
    _check_choices(activation_checkpoint, precision, fp8_recipe)
    dp_mesh = _data_parallel_mesh(mesh)
    if precision == "fp8":
        require_fp8_device()
        convert_to_float8(model, fp8_recipe, fsdp=dp_mesh is not None)
    if tp > 1:
        if mesh is None or "tp" not in (mesh.mesh_dim_names or ()):
            raise ValueError(f"tensor parallel {tp} needs a mesh with a 'tp' dimension (device_mesh(..., tp={tp}))")
        if model.seq_len % tp:  # sequence parallelism splits every sequence evenly (TorchTitan asserts the same)
            raise ValueError(f"sequence length {model.seq_len} must be a multiple of tensor parallel {tp}")
        apply_tp(model, mesh["tp"], float8_tensorwise=precision == "fp8" and fp8_recipe == "tensorwise",
                 loss_parallel=loss_parallel)
    if activation_checkpoint != "none":
        apply_ac(model, activation_checkpoint)
    if compile:
        apply_compile(model)
    if dp_mesh is not None:
        apply_fsdp(model, dp_mesh, precision, reshard_after_forward=reshard_after_forward)
    return model


def loss_context(tp: int, loss_parallel: bool = True) -> Any:
    """Where the loss and its backward must run: inside ``torch.distributed.tensor.parallel.loss_parallel`` when
    the logits are sharded over the vocabulary (tensor parallel, ``loss_parallel``), so cross-entropy reduces across
    the shards (TorchTitan's ``train_context``); a null context otherwise."""
    if tp > 1 and loss_parallel:
        from torch.distributed.tensor.parallel import loss_parallel as sharded_loss

        return sharded_loss()
    return contextlib.nullcontext()


def autocast_dtype(mesh: DeviceMesh | None, precision: str) -> torch.dtype | None:
    """What the trainer's forward runs under ``torch.autocast`` in: bf16 where the precision wants it and no
    FSDP mixed-precision policy gives it (no data-parallel dimension), else ``None``."""
    return torch.bfloat16 if precision in ("bf16", "fp8") and _data_parallel_mesh(mesh) is None else None


def _check_choices(activation_checkpoint: str, precision: str, fp8_recipe: str) -> None:
    for what, value, valid in (("activation_checkpoint", activation_checkpoint, ACTIVATION_CHECKPOINTS),
                               ("precision", precision, PRECISIONS), ("fp8_recipe", fp8_recipe, FP8_RECIPES)):
        if value not in valid:
            raise ValueError(f"{what} {value!r} is not one of {', '.join(valid)}")


def _data_parallel_mesh(mesh: DeviceMesh | None) -> DeviceMesh | None:
    """The (sub-)mesh FSDP shards over: ``dp_shard``, or ``(dp_replicate, dp_shard)`` for HSDP; ``None`` where
    there is no data parallelism (TorchTitan applies FSDP only where ``dp_shard * dp_replicate > 1``)."""
    names = tuple(n for n in (mesh.mesh_dim_names or ()) if n.startswith("dp_")) if mesh is not None else ()
    if not names:
        return None
    sub = mesh[names] if names != mesh.mesh_dim_names else mesh
    return sub if sub.size() > 1 else None


def apply_tp(model: nn.Module, tp_mesh: DeviceMesh, *, float8_tensorwise: bool = False,
             loss_parallel: bool = True) -> None:
    """Tensor and sequence parallelism: TorchTitan's ``apply_tp``.

    Between blocks the activations are sharded on the sequence (``Shard(1)``); each block gathers them before
    ``wq``/``wk``/``wv`` and ``w1``/``w3`` (column-parallel: each rank its own heads and hidden units) and
    reduce-scatters after ``wo`` and ``w2`` (row-parallel). The embedding is row-parallel over the vocabulary with
    its output sharded on the sequence; the output layer is column-parallel. With ``loss_parallel`` (TorchTitan's
    default) its logits stay sharded over the vocabulary, a DTensor the loss reads inside ``loss_context``, so no
    rank holds the whole batch x sequence x vocabulary; without, every rank gets the full logits as a plain
    tensor. The sequence length must be a multiple of the tp degree.
    """
    output = Shard(-1) if loss_parallel else Replicate()
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=output, use_local_output=not loss_parallel),
    })
    if model.shape.tied_embeddings:  # TP gave each module its own copy: share the (equally sharded) embedding
        model.output.weight = model.tok_embeddings.weight
    rowwise, colwise, prepare_input = _tp_styles(float8_tensorwise)
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": prepare_input(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
            "attention.wq": colwise(),
            "attention.wk": colwise(),
            "attention.wv": colwise(),
            "attention.wo": rowwise(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": prepare_input(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": colwise(),
            "feed_forward.w2": rowwise(output_layouts=Shard(1)),
            "feed_forward.w3": colwise(),
        })


def _tp_styles(float8_tensorwise: bool) -> tuple:
    """(rowwise, colwise, prepare-input) styles: torchao's float8 ones for tensorwise fp8 (the all-gathers then
    move float8), torch's otherwise (rowwise fp8 gathers in high precision), as TorchTitan chooses."""
    if not float8_tensorwise:
        return RowwiseParallel, ColwiseParallel, PrepareModuleInput
    from torchao.float8.float8_tensor_parallel import (
        Float8ColwiseParallel,
        Float8RowwiseParallel,
        PrepareFloat8ModuleInput,
    )

    return Float8RowwiseParallel, Float8ColwiseParallel, PrepareFloat8ModuleInput


# Selective ("op") checkpointing saves these ops' outputs and recomputes the rest: TorchTitan's
# ``_op_sac_save_list`` (torchtitan/models/llama3/infra/parallelize.py), with the CPU's attention kernel added.
_SAC_SAVE = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
    torch.ops.aten.max.default,  # float8 scales come from an absolute maximum: keep it
}


def _sac_context():
    """One block's selective-checkpoint contexts: save every listed op's output except every second matmul
    (TorchTitan's op policy before its tensor-naming rewrite: ``_get_custom_policy`` with ``mm_count``)."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    counts: dict[str, int] = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            counts[mode] += 1
        save = func in _SAC_SAVE and not (func == torch.ops.aten.mm.default and counts[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def apply_ac(model: nn.Module, mode: str) -> None:
    """Wrap each block in a (non-reentrant) checkpoint: ``full`` recomputes the whole block in the backward,
    ``selective`` only what ``_sac_context`` does not save. The wrapped block replaces the original by name."""
    for layer_id, block in list(model.layers.named_children()):
        if mode == "full":
            wrapped = checkpoint_wrapper(block, preserve_rng_state=False)
        else:
            wrapped = checkpoint_wrapper(block, context_fn=_sac_context, preserve_rng_state=False)
        model.layers.register_module(layer_id, wrapped)


def apply_compile(model: nn.Module) -> None:
    """``torch.compile`` each block on its own (its structure repeats, so one compilation serves all), whole
    graph: a graph break in a block is an error here, not a silent slowdown (TorchTitan's ``apply_compile``)."""
    for layer_id, block in list(model.layers.named_children()):
        model.layers.register_module(layer_id, torch.compile(block, fullgraph=True))


def apply_fsdp(model: nn.Module, dp_mesh: DeviceMesh, precision: str, *, reshard_after_forward: bool = True) -> None:
    """FSDP2 ``fully_shard`` on each block, then on the root (the embedding, final norm and output). bf16 and fp8
    gather parameters in bf16 and reduce gradients in fp32; fp32 has no policy. A 2-D ``dp_mesh``
    (dp_replicate, dp_shard) makes it HSDP: sharded within a node, gradients all-reduced across nodes."""
    kwargs = {"mesh": dp_mesh}
    if precision in ("bf16", "fp8"):
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers.values():
        fully_shard(block, reshard_after_forward=reshard_after_forward, **kwargs)
    fully_shard(model, **kwargs)  # the root is not resharded after the forward: its backward comes first


def require_fp8_device() -> None:
    """The last guard for fp8 (the config layer refuses it earlier): a CUDA GPU of capability 8.9 or later."""
    if not torch.cuda.is_available():
        raise RuntimeError("precision fp8 needs a CUDA GPU with float8 tensor cores (capability >= 8.9: L4, L40S, "
                           "H100, H200); this process has no CUDA device: use bf16 or fp32")
    capability = torch.cuda.get_device_capability()
    if capability < FP8_MIN_CAPABILITY:
        raise RuntimeError(f"precision fp8 needs CUDA capability >= 8.9 (L4, L40S, H100, H200); "
                           f"{torch.cuda.get_device_name()} is {capability[0]}.{capability[1]}: use bf16")


def convert_to_float8(model: nn.Module, recipe: str, *, fsdp: bool) -> nn.Module:
    """Swap every ``nn.Linear`` but ``output`` (kept in bf16, as TorchTitan keeps it) for torchao's
    ``Float8Linear`` with the ``recipe`` (torchtitan ``torchtitan/components/quantization/float8.py``).
    Tensorwise under FSDP all-gathers float8 weights. Linears whose sizes are not multiples of 16 stay too:
    float8 matmuls need them. Checks no device: ``parallelize`` calls ``require_fp8_device`` first."""
    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as e:
        raise RuntimeError(f"precision fp8 needs torchao ({TORCHAO_PIN}) in the image: {e}") from e
    config = Float8LinearConfig.from_recipe_name(recipe)
    if recipe == "tensorwise" and fsdp:
        config = dataclasses.replace(config, enable_fsdp_float8_all_gather=True)
    if recipe == "rowwise":  # TorchTitan's stopgap for pytorch/pytorch#150859 (inductor's float8 casts)
        import torch._inductor.config

        torch._inductor.config.emulate_precision_casts = True

    def converts(module: nn.Module, fqn: str) -> bool:
        return (fqn != "output" and isinstance(module, nn.Linear)
                and module.in_features % 16 == 0 and module.out_features % 16 == 0)

    return convert_to_float8_training(model, config=config, module_filter_fn=converts)
