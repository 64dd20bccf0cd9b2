"""A language model's parts of a PyTorch run (workload ``llama3``): the trainer holds one ``LanguageModel`` and asks
it what differs from an image classifier, and nothing else of the run branches on the workload.

- **Shape and batch.** The model is ``core.catalog.llm.MODELS[--model-size]`` at ``--seq-len`` tokens (0: the
  shape's default). ``--batch-size`` is sequences per GPU: a tensor-parallel group of ``tp`` consecutive ranks
  trains ``batch x tp`` sequences together, every rank of the group on the same ones, so the global batch is
  ``batch x world`` whatever ``tp`` is and each rank's metrics line counts ``batch`` samples, as for the others.
- **Parallelism** (``workloads.train.pytorch.llama_parallel``): built on the meta device, then tensor parallel,
  activation checkpointing, compile and FSDP2 (or HSDP) in TorchTitan's order, then given storage and initialised
  on the device, so no rank ever holds the whole unsharded model in fp32. Under tensor parallelism the logits stay
  sharded over the vocabulary and the loss is computed in loss parallelism (``step_context``).
- **Precision.** bf16 and fp8 train with FSDP2's mixed precision (bf16 parameters, fp32 reduction; fp8 adds
  torchao's float8 linears), so no autocast; fp32 trains in fp32; amp-fp16 (V100) keeps fp32 parameters under
  fp16 autocast with GradScaler.
- **Optimizer.** AdamW (TorchTitan's: betas 0.9/0.95, weight decay 0.1, eps 1e-8), fused on a GPU.
- **FLOPs** are counted from the shape, per token (``LlamaShape.flops_per_token``), never by running the model.
- **State.** Parameters are sharded, so a checkpoint gathers the full state dict on rank 0 (every rank takes part:
  ``torch.distributed.checkpoint.state_dict``, CPU offload), under the model's own names whatever wraps it, and
  every rank takes its shards of it back on resume, whatever the new world's layout.
- **Validation.** Every ``--val-every`` steps and at the end, every rank (the model is sharded) computes the loss
  on fixed held-out batches; rank 0 writes ``{"step", "tokens", "val_loss"}`` to the evaluations file.
"""

from __future__ import annotations

import math
import time
from typing import Any

from core.catalog.llm import MODELS
from core.contract.train_args import TrainArgs

ADAMW = {"betas": (0.9, 0.95), "weight_decay": 0.1, "eps": 1e-8}  # TorchTitan's defaults (components/optimizer.py)
VAL_BATCHES = 8  # held-out batches per validation, per data-parallel rank (each rank its own)
MIXED_PARAMS = ("bf16", "fp8")  # FSDP2 keeps bf16 parameters for these: no autocast


def seq_len_of(args: TrainArgs) -> int:
    return args.seq_len or MODELS[args.model_size].default_seq_len


class LanguageModel:
    """The language-model parts of one rank's run: shape, mesh, data, model, optimizer, FLOPs, state, validation."""

    def __init__(self, args: TrainArgs, *, rank: int, world: int, local_world: int, precision: str):
        self.args, self.shape = args, MODELS[args.model_size]
        self.seq_len, self.tp, self.precision = seq_len_of(args), args.tensor_parallel, precision
        if local_world % self.tp or world % self.tp:
            raise ValueError(f"--tensor-parallel={self.tp} must divide the processes per node ({local_world}) and "
                             f"the world ({world}): a tensor-parallel group stays inside a node")
        self.data_rank, self.data_world = rank // self.tp, world // self.tp
        self.data_batch = args.batch_size * self.tp  # sequences one TP group trains per step
        self.world, self.local_world = world, local_world
        self.mesh: Any = None
        self.val: list[tuple[Any, Any]] = []

    @property
    def sharded(self) -> bool:
        return self.mesh is not None

    def autocast_precision(self) -> str:
        """The precision ``autocast_factory`` should give the steps: none where FSDP2 casts the parameters."""
        from workloads.train.pytorch.llama_parallel import autocast_dtype

        if self.precision in MIXED_PARAMS:  # bf16 autocast only where no FSDP2 policy casts (no data parallelism)
            return "bf16" if autocast_dtype(self.mesh, self.precision) is not None else "fp32"
        return self.precision

    def step_context(self) -> Any:
        """What a step's loss and backward run in: loss parallelism where tensor parallelism shards the logits."""
        from workloads.train.pytorch.llama_parallel import loss_context

        return loss_context(self.tp if self.sharded else 1)

    def build(self, device: Any, distributed: bool, compile: bool) -> tuple[Any, Any]:
        """(the token source, the parallelised model with storage on ``device``); its loss is ``lm_loss``."""
        import torch

        from workloads.train.pytorch import llama, llama_parallel

        if distributed:
            self.mesh = llama_parallel.device_mesh(self.world, self.tp, self.local_world, self.args.sharding,
                                                   device.type)
        source = self.source(device)
        if device.type == "cuda" and self.precision == "fp32":
            # fp32 matmuls on TF32 tensor cores, the peak core.catalog.peaks divides an fp32 run's MFU by
            torch.backends.cuda.matmul.allow_tf32 = True
        with torch.device("meta"):
            model = llama.build_llama(self.shape, self.seq_len)
        # one process has no mesh: float8, checkpointing and compile still apply, FSDP and TP do not
        model = llama_parallel.parallelize(
            model, self.mesh, tp=self.tp, activation_checkpoint=self.args.activation_checkpoint,
            compile=compile, precision=self.precision if self.precision in llama_parallel.PRECISIONS else "fp32",
            fp8_recipe=self.args.fp8_recipe)
        model.to_empty(device=device)
        # Drawn after sharding (no rank ever holds the whole fp32 model): the same seed gives the same model for
        # one layout, not the same numbers across layouts (tests/workloads/train/pytorch/test_llama.py initialises
        # first where it compares layouts)
        model.init_weights(self.args.seed, buffer_device=device)
        return source, model

    def source(self, device: Any) -> Any:
        from workloads.train.common import tokens

        a = self.args
        if a.dataset == "synthetic":
            return tokens.SyntheticTokens(batch=self.data_batch, seq_len=self.seq_len, vocab_size=self.shape.vocab_size,
                                          device=device, seed=a.seed + self.data_rank)
        root = tokens.token_root(a.data_dir, a.dataset)
        # held-out batches spread over the split, each data-parallel rank its own share (the validation loss is their
        # mean over the ranks); a split too small for a share each gives every rank the same ones
        held_out = tokens.validation_batches(root, seq_len=self.seq_len, batch=self.args.batch_size,
                                             max_batches=VAL_BATCHES * self.data_world, device=device,
                                             vocab_size=self.shape.vocab_size)
        self.val = held_out[self.data_rank::self.data_world] if len(held_out) >= self.data_world else held_out
        return tokens.TokenShards(root, "train", batch=self.data_batch, seq_len=self.seq_len, device=device,
                                  seed=a.seed, vocab_size=self.shape.vocab_size, dp_rank=self.data_rank)

    def note(self) -> str:
        mesh = dict(zip(self.mesh.mesh_dim_names, self.mesh.shape)) if self.mesh is not None else "one process"
        return (f"Llama 3 {self.shape.name} ({self.shape.parameters:,} parameters), seq {self.seq_len}, "
                f"mesh {mesh}, activation checkpointing {self.args.activation_checkpoint}")

    def optimizer(self, model: Any, lr: float, fused: bool) -> Any:
        import torch

        return torch.optim.AdamW(model.parameters(), lr=lr, **ADAMW, **({"fused": True} if fused else {}))

    def flops_per_sample(self) -> tuple[float, str]:
        per_token = self.shape.flops_per_token(self.seq_len)
        return float(per_token * self.seq_len), (
            f"6 x (N - N_embedding) + 12 x L x d x T = {per_token:,} FLOPs per token x {self.seq_len} tokens "
            "(TorchTitan's count; attention as the full square, recomputation not counted)")

    def info(self) -> dict[str, Any]:
        """What ``run_info`` adds for a language model (the summary's token figures read these)."""
        return {"tokens_per_sample": self.seq_len, "flops_per_token": self.shape.flops_per_token(self.seq_len),
                "parameters": self.shape.parameters, "model_size": self.shape.name, "seq_len": self.seq_len,
                "tensor_parallel": self.tp, "data_parallel": self.data_world,
                "sharding": self.args.sharding if self.sharded else None,
                "activation_checkpoint": self.args.activation_checkpoint, "target_loss": self.args.target_loss,
                "fp8_recipe": self.args.fp8_recipe if self.precision == "fp8" else None,
                "mesh": dict(zip(self.mesh.mesh_dim_names, self.mesh.shape)) if self.sharded else None}

    def full_state(self, model: Any, optimizer: Any) -> dict[str, Any]:
        """Model and optimizer state as full (unsharded) tensors on rank 0's CPU; every rank must call it."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        model_sd, optim_sd = get_state_dict(model, optimizer, options=options)
        return {"model": model_sd, "optimizer": optim_sd}

    def load_full_state(self, model: Any, optimizer: Any, state: dict[str, Any]) -> None:
        """The full state every rank read from the checkpoint, each rank keeping its own shards of it; every rank
        must call it. Not ``broadcast_from_rank0``: with gloo its object broadcast waited forever here (the
        two-rank resume in tests/workloads/train/pytorch/test_language_model_run.py), and every rank has read the
        file anyway (``checkpoint.load_latest``, for the step and position)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"],
                       options=StateDictOptions(full_state_dict=True))

    def due(self, step: int, last: bool) -> bool:
        """Whether a validation comes after global step ``step``: every ``--val-every`` steps and at the end."""
        every = self.args.val_every
        return bool(self.val) and (last or (every > 0 and step % every == 0))

    def validate(self, model: Any, autocast: Any, *, step: int, tokens: int, started: float,
                 evals: Any, all_reduce_mean: Any) -> float:
        """The mean loss over the held-out batches, averaged over the data-parallel ranks (every rank runs the
        sharded model); rank 0 writes it."""
        import torch

        model.eval()
        with torch.no_grad(), self.step_context(), autocast():
            losses = [float(lm_loss(model, x, y).item()) for x, y in self.val]
        model.train()
        loss = all_reduce_mean(sum(losses) / len(losses))
        if evals is not None:
            evals.write({"step": step, "tokens": tokens, "val_loss": round(loss, 6) if math.isfinite(loss) else None,
                         "elapsed_s": round(time.time() - started, 3), "wall_time": round(time.time(), 3)})
        return loss


def lm_loss(model: Any, x: Any, y: Any) -> Any:
    """Next-token cross-entropy over every position, in fp32 (TorchTitan's ``cross_entropy_loss``)."""
    import torch

    logits = model(x)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten(0, 1))


