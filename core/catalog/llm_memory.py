"""How much memory one GPU needs to train a Llama 3 shape (``core.catalog.llm``): an estimate, part by part.

The plan prints it beside the GPU's memory (``core.catalog.aws.InstanceType.gpu_memory_gib``) and the meaning rules
(``program.language_model_checks``) refuse an experiment whose estimate exceeds it. It is an estimate of what the
CUDA caching allocator must hold at the peak of a step, not a measurement, and it errs in both directions: the
allocator reserves more than it hands out (fragmentation), and kernels need workspaces it does not count. Every
term, where it comes from:

- **state**: fp32 parameters, fp32 gradients and AdamW's two fp32 moments, 16 bytes per parameter, sharded by
  FSDP2 (``fully_shard``) over its shard group: every rank with ``sharding: fsdp`` (the data-parallel ranks, each
  holding 1/tp of every tensor-parallel weight, so all nodes x GPUs), one node's ranks with ``hsdp`` (replicated
  across nodes, sharded within one).
- **parameters in flight**: the unsharded 16-bit copies FSDP2 all-gathers (``MixedPrecisionPolicy(param_dtype=
  bf16)``): about three blocks at once (the one computing, the next prefetched, the last not yet freed) plus the
  root's embedding, final norm and output, which workloads.train.pytorch.llama_parallel shards with the root; over
  tp, as tensor parallelism splits every weight.
- **activations**: what a block keeps for its backward with SDPA (flash or memory-efficient attention), in
  bytes per token in bf16: its input and the normalised input at both RMSNorms (4 x dim), q (dim), k and v after
  RoPE (4 x kv_dim), the attention output (dim), and the SwiGLU's w1 and w3 outputs, their activation and product
  (8 x ffn_hidden): about 12 x dim + 4 x kv_dim + 8 x ffn_hidden, counted as Korthikanti et al. 2022, "Reducing
  Activation Recomputation in Large Transformer Models" (arXiv:2205.05198, section 4) count a GPT block's, for a
  Llama block whose fused attention keeps no score matrix. A TP group of tp GPUs trains batch x tp sequences, and
  with tensor and sequence parallelism each GPU keeps 1/tp of their activations (the same section): batch x seq_len
  tokens' worth a GPU. ``full`` checkpointing keeps each block's input only, and one block's activations while it
  is recomputed; ``selective`` (TorchTitan's per-op policy: every matmul's output but every second one, the
  attention's output) keeps about 60% of ``none``: a rough figure, since what it saves depends on the op policy,
  not on a count of ours.
- **logits**: the output layer's bf16 logits and the fp32 copy the cross-entropy works in, tokens x vocabulary x 6
  bytes; under tensor parallelism the loss is parallel (workloads.train.pytorch.llama_parallel, TorchTitan's loss
  parallelism), so each GPU of a TP group holds 1/tp of the vocabulary for all of its batch x tp sequences.
- **CUDA context and NCCL**: a fixed 2 GiB (the CUDA context, cuBLAS workspaces and NCCL's buffers).

``fp32`` precision doubles the parameters in flight and the activations, and its logits take 8 bytes (fp32 logits
and the fp32 log-softmax). ``fp8`` counts as bf16: TorchTitan measured 76.8 GiB with float8 against 77.0 without
(8B, 8 H100, compiled, ``benchmarks/llama3_h100_202412_torchtitan.md``). Against TorchTitan's published peaks (same
file: 8B, local batch 2, selective checkpointing, eager) this gives 81 GiB where 8 GPUs measured 82.4 and 67 GiB
where 128 measured 67.0; AWS's 4 x p5.48xlarge run (batch 1) reported 68.57 GiB where this gives 39 GiB (reserved
memory, which the caching allocator keeps beyond what it hands out), so a run near its GPU's memory may still run
out. Standard library only (the pods ship core/).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.catalog.aws import INSTANCE_TYPES
from core.catalog.llm import LlamaShape

GIB = 2**30
OVERHEAD_BYTES = 2 * GIB  # CUDA context, cuBLAS workspaces, NCCL buffers
STATE_BYTES_PER_PARAMETER = 16  # fp32 parameter, fp32 gradient, AdamW exp_avg and exp_avg_sq
BLOCKS_IN_FLIGHT = 3  # the block computing, the next prefetched, the last not yet freed
SELECTIVE_SHARE = 0.6  # of "none": TorchTitan's per-op selective checkpointing, roughly


@dataclass(frozen=True)
class MemoryEstimate:
    """One GPU's training memory at a step's peak, in bytes, part by part (an estimate: see the module)."""

    state: int  # fp32 parameters, gradients and AdamW moments, this GPU's shard
    params_in_flight: int  # unsharded 16-bit parameters FSDP2 has gathered
    activations: int  # what the blocks keep for backward
    logits: int  # the output layer's logits and the loss's fp32 copy
    overhead: int = OVERHEAD_BYTES  # CUDA context and NCCL
    capacity: int | None = None  # the GPU's memory; None where unknown

    @property
    def total(self) -> int:
        return self.state + self.params_in_flight + self.activations + self.logits + self.overhead

    @property
    def fits(self) -> bool | None:
        """Whether the total is within the GPU's memory; None where that is unknown."""
        return None if self.capacity is None else self.total <= self.capacity

    def parts(self) -> str:
        """``state 15.0, activations 24.6, ...`` in GiB, largest first."""
        named = {"state": self.state, "activations": self.activations, "logits": self.logits,
                 "parameters in flight": self.params_in_flight, "CUDA context and NCCL": self.overhead}
        return ", ".join(f"{k} {v / GIB:.1f}" for k, v in sorted(named.items(), key=lambda kv: -kv[1]))

    def text(self) -> str:
        """``50.6 GiB of 80 GiB (state 15.0, activations 24.6, ...)``."""
        of = f" of {self.capacity / GIB:.0f} GiB" if self.capacity is not None else ""
        return f"{self.total / GIB:.1f} GiB{of} ({self.parts()})"


def activation_bytes_per_token_layer(shape: LlamaShape) -> int:
    """What one block keeps for backward per token in bf16 (see the module): 12 x dim + 4 x kv_dim + 8 x ffn."""
    kv_dim = shape.n_kv_heads * shape.head_dim
    return 12 * shape.dim + 4 * kv_dim + 8 * shape.ffn_hidden


def gpu_memory_bytes(instance_type: str | None) -> int | None:
    """One GPU's memory on ``instance_type`` (core.catalog.aws), None for a type with no GPU or not in the catalog."""
    spec = INSTANCE_TYPES.get(instance_type or "")
    return spec.gpu_memory_gib * GIB if spec is not None and spec.gpu_memory_gib else None


def memory_per_gpu(shape: LlamaShape, *, seq_len: int, batch: int, gpus_per_node: int, nodes: int, tp: int,
                   sharding: str, activation_checkpoint: str, precision: str,
                   capacity: int | None = None) -> MemoryEstimate:
    """One GPU's training memory for ``shape`` at ``seq_len`` with ``batch`` sequences per GPU (a TP group of ``tp``
    GPUs trains batch x tp), on ``nodes`` x ``gpus_per_node`` GPUs; ``capacity``: the GPU's memory in bytes, for
    ``fits`` and ``text``. An estimate: the module says where each term comes from."""
    wide = 4 if precision == "fp32" else 2  # bytes of a parameter or an activation in flight
    shard_group = nodes * gpus_per_node if sharding == "fsdp" else gpus_per_node
    state = math.ceil(STATE_BYTES_PER_PARAMETER * shape.parameters / shard_group)
    root = shape.parameters - shape.n_layers * shape.layer_parameters  # embedding, final norm, output
    in_flight = math.ceil((BLOCKS_IN_FLIGHT * shape.layer_parameters + root) * wide / tp)
    group_tokens = batch * tp * seq_len  # the TP group's tokens; each GPU keeps 1/tp of their activations
    per_layer = group_tokens * activation_bytes_per_token_layer(shape) * wide // 2 // tp
    if activation_checkpoint == "none":
        activations = shape.n_layers * per_layer
    elif activation_checkpoint == "selective":
        activations = math.ceil(SELECTIVE_SHARE * shape.n_layers * per_layer)
    else:  # full: every block's input (sequence-sharded), and one block recomputed at a time
        activations = shape.n_layers * group_tokens * shape.dim * wide // tp + per_layer
    logits = group_tokens * shape.vocab_size * (8 if precision == "fp32" else 6) // tp
    return MemoryEstimate(state=state, params_in_flight=in_flight, activations=activations, logits=logits,
                          capacity=capacity)
