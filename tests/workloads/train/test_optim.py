"""The trainer's SGD survives GradScaler's skipped first steps (workloads.train.pytorch.optim).

torch's fused SGD has the same fault on the CPU as on the H100 where it was found: a first step that
GradScaler skips (an inf gradient, as amp-fp16's first steps at scale 65536 give) leaves the momentum
buffers as ``torch.empty_like`` made them. Freed NaN blocks of the buffers' size are put back in the
allocator first, so an uninitialised buffer reads as NaN instead of whatever memory happened to hold.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from workloads.train.pytorch.optim import seed_momentum, sgd  # noqa: E402

N = 1000  # small enough that the allocator hands back the freed NaN blocks


def skipped_then_good_step(optimizer, p):
    scaler = torch.amp.GradScaler("cpu", init_scale=65536.0)
    junk = [torch.full((N,), float("nan")) for _ in range(8)]
    del junk
    scaler.scale(p.sum()).backward()
    p.grad.fill_(float("inf"))  # the overflow GradScaler finds in amp-fp16's first steps
    scaler.step(optimizer)
    scaler.update()
    buffer = optimizer.state[p]["momentum_buffer"].clone()
    optimizer.zero_grad()
    scaler.scale(p.sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    return buffer, scaler.get_scale()


def test_fused_sgd_after_a_skipped_first_step_steps_as_plain_sgd():
    p = torch.nn.Parameter(torch.ones(N))
    buffer, scale = skipped_then_good_step(sgd([p], lr=0.1, fused=True), p)
    assert scale == 32768.0  # the first step was skipped and the scale halved
    assert torch.equal(buffer, torch.zeros(N))  # never uninitialised memory
    # the good step is plain SGD's first step: buf = grad (1) + weight decay, p -= lr * buf
    ref = torch.nn.Parameter(torch.ones(N))
    plain = torch.optim.SGD([ref], lr=0.1, momentum=0.9, weight_decay=1e-4)
    ref.sum().backward()
    plain.step()
    assert torch.isfinite(p).all() and torch.allclose(p, ref)


def test_seed_momentum_fills_only_missing_buffers_of_momentum_groups():
    a, b = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([{"params": [a], "momentum": 0.9}, {"params": [b], "momentum": 0.0}], lr=0.1)
    assert seed_momentum(opt) == 1 and b not in opt.state
    opt.state[a]["momentum_buffer"].fill_(5.0)
    assert seed_momentum(opt) == 0 and opt.state[a]["momentum_buffer"][0] == 5.0  # a resumed buffer is kept


def test_the_trainer_steps_a_seeded_optimizer(tmp_path, monkeypatch):
    from dataclasses import replace

    from tests.workloads.train.test_train_timing import TINY
    from workloads.train.pytorch.trainer import Run

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    run = Run(replace(TINY, results_dir=str(tmp_path)), {"rank": 0, "world_size": 1, "local_rank": 0, "restart": 0})
    try:
        run.build()
        params = [p for g in run.optimizer.param_groups for p in g["params"]]
        assert params and all(torch.equal(run.optimizer.state[p]["momentum_buffer"], torch.zeros_like(p))
                              for p in params)
    finally:
        run.close()
