"""One rank of the Llama parallelism checks: test_llama.py beside it starts two under torchrun, on gloo.

Each named case builds the same ``tiny`` model from one seed, parallelises it with ``llama_parallel`` and trains
it a few steps on one fixed token batch. Rank 0 writes ``{case: {"losses": [...], "mesh": [names, sizes]}}`` as
JSON: a step's global loss is the mean over ranks of each rank's mean loss (over data-parallel ranks, the loss of
the whole batch; tensor-parallel ranks all see the whole batch). The test compares them with one process
training the whole batch (``train_losses`` there too).

    python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        -m tests.workloads.train.pytorch.llama_ranks OUT CASE...
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F

from core.catalog.llm import MODELS, LlamaShape
from workloads.train.pytorch.llama import build_llama
from workloads.train.pytorch.llama_parallel import device_mesh, loss_context, parallelize

SEQ, BATCH, STEPS, LR, SEED = 64, 4, 3, 1e-3, 0
TIED = dataclasses.replace(MODELS["tiny"], name="tiny-tied", tied_embeddings=True)


class Case(NamedTuple):
    """One layout of two ranks: what ``device_mesh`` and ``parallelize`` are given."""

    shape: LlamaShape = MODELS["tiny"]
    tp: int = 1
    local_world: int = 2
    sharding: str = "fsdp"
    activation_checkpoint: str = "none"
    precision: str = "fp32"
    compile: bool = False
    loss_parallel: bool = False  # tp > 1: logits sharded over the vocabulary, the loss inside loss_context


CASES = {
    "fsdp": Case(),
    "fsdp_full_ac": Case(activation_checkpoint="full"),
    "fsdp_selective_ac": Case(activation_checkpoint="selective"),
    "fsdp_bf16": Case(precision="bf16"),
    "fsdp_compile": Case(activation_checkpoint="selective", compile=True),
    "hsdp": Case(local_world=1, sharding="hsdp"),  # two "nodes" of one process: replicate 2 x shard 1
    "tp": Case(tp=2),
    "tp_selective_ac": Case(tp=2, activation_checkpoint="selective"),
    "tp_tied": Case(TIED, tp=2),
    "tp_loss_parallel": Case(tp=2, loss_parallel=True),
    "tp_loss_parallel_tied": Case(TIED, tp=2, loss_parallel=True, activation_checkpoint="selective"),
}


def token_batch(vocab: int, batch: int = BATCH, seq: int = SEQ) -> torch.Tensor:
    """The fixed batch: ``batch`` rows of ``seq + 1`` random tokens (inputs, then the next token as label)."""
    return torch.randint(0, vocab, (batch, seq + 1), generator=torch.Generator().manual_seed(1234))


def train_losses(model: torch.nn.Module, tokens: torch.Tensor, steps: int = STEPS, lr: float = LR,
                 context=contextlib.nullcontext) -> list[float]:
    """Train ``steps`` AdamW steps on ``tokens``; each step's mean next-token loss (this process's); the loss and
    its backward run inside ``context()`` (``llama_parallel.loss_context``)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        with context():
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach())
    return [float(x) for x in losses]


def run_case(case: str) -> dict:
    """The case's global losses, and its mesh's dimension names and sizes."""
    c = CASES[case]
    rank, world, tp = dist.get_rank(), dist.get_world_size(), c.tp
    mesh = device_mesh(world, tp, c.local_world, c.sharding, "cpu")
    model = parallelize(build_llama(c.shape, SEQ, seed=SEED), mesh, tp=tp, compile=c.compile,
                        activation_checkpoint=c.activation_checkpoint, precision=c.precision,
                        loss_parallel=c.loss_parallel)
    tokens = token_batch(c.shape.vocab_size)
    dp_rank, dp_size = rank // tp, world // tp
    rows = BATCH // dp_size
    own = tokens[dp_rank * rows:(dp_rank + 1) * rows]
    losses = torch.tensor(train_losses(model, own, context=lambda: loss_context(tp, c.loss_parallel)),
                          dtype=torch.float64)
    dist.all_reduce(losses)
    return {"losses": (losses / world).tolist(), "mesh": [list(mesh.mesh_dim_names), list(mesh.shape)]}


def main(out: str, cases: list[str]) -> None:
    dist.init_process_group("gloo")
    try:
        found = {case: run_case(case) for case in cases}
        if dist.get_rank() == 0:
            with open(out, "w") as f:
                json.dump(found, f)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
