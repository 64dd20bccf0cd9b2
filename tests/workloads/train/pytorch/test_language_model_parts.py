"""A language model's recipe as the trainer applies it: TorchTitan's 8B schedule (3e-4, a linear warm-up over 200
steps from about 1/201 of it, llama3_8b.toml) and its gradient clipping to norm 1.0; and the parts' bookkeeping
under tensor parallelism (which data-parallel rank and batch a rank trains)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from core.catalog.workload_facts import WORKLOADS
from core.contract.train_args import TrainArgs
from workloads.train.common.schedule import lr_at
from workloads.train.pytorch.collectives import Collectives
from workloads.train.pytorch.language_model import LanguageModel


def test_the_rate_is_torchtitans_whatever_the_batch_and_warms_up_over_200_steps():
    args = TrainArgs(workload="llama3", steps=5000, batch_size=1)
    assert lr_at(args, 8, 200) == lr_at(TrainArgs(workload="llama3", steps=5000, batch_size=4), 64, 500) == 3e-4
    assert lr_at(args, 8, 0) == pytest.approx(3e-4 * 0.005) and lr_at(args, 8, 100) == pytest.approx(3e-4 * 0.5025)
    # a short run warms up over a tenth of itself, so it trains at the rate at all
    assert lr_at(TrainArgs(workload="llama3", steps=30), 2, 3) == 3e-4


def test_gradients_are_clipped_to_norm_one_before_the_step():
    import torch

    model = torch.nn.Linear(4, 4)
    for p in model.parameters():
        p.grad = torch.full_like(p, 10.0)
    run = SimpleNamespace(facts=WORKLOADS["llama3"], model=model, device=torch.device("cpu"),
                          scaler=torch.amp.GradScaler("cpu", enabled=False), optimizer=None)
    Collectives.clip_gradients(run)
    norm = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert norm == pytest.approx(1.0, rel=1e-5)
    for p in model.parameters():  # an image workload is not clipped
        p.grad = torch.full_like(p, 10.0)
    Collectives.clip_gradients(SimpleNamespace(**{**vars(run), "facts": WORKLOADS["resnet50"]}))
    assert all(bool((p.grad == 10.0).all()) for p in model.parameters())


def test_a_tensor_parallel_group_is_one_data_parallel_rank_with_the_groups_batch():
    args = TrainArgs(workload="llama3", model_size="8b", batch_size=2, tensor_parallel=4)
    parts = [LanguageModel(args, rank=r, world=16, local_world=8, precision="bf16") for r in range(16)]
    assert [p.data_rank for p in parts] == [r // 4 for r in range(16)]
    assert {p.data_batch for p in parts} == {8} and {p.data_world for p in parts} == {4}
    with pytest.raises(ValueError, match="must divide the processes per node"):
        LanguageModel(TrainArgs(workload="llama3", tensor_parallel=3), rank=0, world=8, local_world=8,
                      precision="bf16")
