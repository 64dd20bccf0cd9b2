"""On a CUDA GPU, each PyTorch workload trains what it claims: a few hundred steps in each precision the GPU
supports, eager and compiled, through the trainer the pods run (``workloads.train.pytorch.trainer.Run``), with a loss
that stays finite and falls.

This is the only check that sees the class of fault found on the first H100 run: fused SGD with GradScaler
read uninitialised momentum (workloads/train/pytorch/optim.py), so ResNet-50 in amp-fp16 trained on NaN weights from
step 3 while the run said ``succeeded``. Run them with ``python3 -m pytest tests/gpu -q`` on a machine with a
CUDA device; elsewhere every test skips, saying so.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from core.contract.train_args import TrainArgs  # noqa: E402
from workloads.train.common.metrics import read_jsonl, read_rank_metrics  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU suite needs one")]

RESNET = TrainArgs(workload="resnet50", dataset="synthetic", batch_size=128, image_size=224, steps=300,
                   channels_last=True, warmup_steps=20, log_every=10, checkpoint_every=0)
CIFAR = TrainArgs(workload="cifar10", dataset="cifar10", batch_size=256, steps=300, channels_last=True,
                  warmup_steps=20, log_every=10, checkpoint_every=0, width_per_group=64)
MASKRCNN = TrainArgs(workload="maskrcnn", dataset="synthetic", batch_size=4, image_size=512, steps=120,
                     warmup_steps=10, log_every=10, checkpoint_every=0)

CASES = [
    *((f"resnet50-{p}-{'compiled' if c else 'eager'}", replace(RESNET, precision=p, compile=c))
      for p in ("fp32", "amp-fp16", "bf16") for c in (False, True) if c is False or p != "fp32"),
    *((f"cifar10-{p}-eager", replace(CIFAR, precision=p)) for p in ("fp32", "amp-fp16", "bf16")),
    ("cifar10-amp-fp16-compiled", replace(CIFAR, precision="amp-fp16", compile=True)),
    *((f"maskrcnn-{p}-eager", replace(MASKRCNN, precision=p)) for p in ("fp32", "amp-fp16")),
]


def train(args: TrainArgs) -> tuple[list[dict], list[dict]]:
    from workloads.train.pytorch.trainer import Run

    run = Run(args, {"rank": 0, "world_size": 1, "local_rank": 0, "restart": 0})
    try:
        run.build()
        run.train()
    finally:
        run.close()
        torch.cuda.empty_cache()
    return read_rank_metrics(args.results_dir)[0], read_jsonl(f"{args.results_dir}/metrics/events.jsonl")


@pytest.mark.parametrize("name, args", CASES, ids=[name for name, _ in CASES])
def test_the_loss_stays_finite_and_falls(name, args, tmp_path, monkeypatch):
    if args.precision == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip(f"{torch.cuda.get_device_name()} has no bf16 support")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    if args.dataset == "cifar10":
        from workloads.train.common.cifar import write_standin

        write_standin(tmp_path / "data", train=4096, test=256)
    lines, events = train(replace(args, results_dir=str(tmp_path / "results"), data_dir=str(tmp_path / "data")))
    assert not [e for e in events if e["event"] == "diverged"], events
    losses = [line["loss"] for line in lines]
    assert len(losses) >= 10 and all(x is not None and math.isfinite(x) for x in losses), losses
    k = max(1, len(losses) // 5)
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    assert last < 0.9 * first, f"{name}: the loss did not fall: first {first:.4f}, last {last:.4f} ({losses})"
    if args.precision == "amp-fp16":
        assert lines[-1]["loss_scale"] > 0 and lines[-1]["skipped_steps"] >= 0
    # the start-up record: the FLOP count a phase of its own, and a compiled model's compile another
    [startup] = [e for e in events if e["event"] == "startup"]
    phases = startup["phases_s"]
    assert "flops" in phases and phases["flops"] < 3.0 and ("compile" in phases) == args.compile, phases
    if args.compile:
        assert phases["compile"] > phases["first_step"], phases


def test_fused_sgd_survives_gradscalers_skipped_first_steps_on_the_gpu():
    """The fault itself, on the device where it was found: an overflowing first step, then good ones."""
    from workloads.train.pytorch.optim import sgd

    p = torch.nn.Parameter(torch.ones(1 << 20, device="cuda"))
    opt = sgd([p], lr=0.1, fused=True)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(5):
        opt.zero_grad()
        scaler.scale(p.sum()).backward()
        if step == 0:
            p.grad.fill_(float("inf"))
        scaler.step(opt)
        scaler.update()
    assert torch.isfinite(p).all() and scaler.get_scale() == 32768.0
