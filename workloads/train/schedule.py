"""What a training step is run with: the process's place in the job, the learning rate, precision.

``dist_env`` reads torchrun's environment; ``default_lr`` is the linear scaling rule (0.1 per
256 images of global batch; Mask R-CNN 0.02 per 16), and ``lr_at`` adds torchvision's detection
reference warm-up; ``set_lr`` applies a rate after a checkpoint restored the old world's;
``autocast_factory`` gives the precision's autocast context. torch is imported inside.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable

from spec.train_args import TrainArgs


def dist_env(environ: dict[str, str]) -> dict[str, int]:
    get = lambda k, d: int(environ.get(k, d))  # noqa: E731
    return {"rank": get("RANK", 0), "world_size": get("WORLD_SIZE", 1), "local_rank": get("LOCAL_RANK", 0),
            "restart": get("TORCHELASTIC_RESTART_COUNT", 0)}


def default_lr(args: TrainArgs, world_size: int) -> float:
    if args.lr is not None:
        return args.lr
    gb = args.batch_size * world_size
    return 0.02 * gb / 16 if args.workload == "maskrcnn" else 0.1 * gb / 256


def lr_at(args: TrainArgs, world_size: int, step: int) -> float:
    """The learning rate for global step ``step`` (0-based) in a world of ``world_size`` processes.

    The linear scaling rule (``default_lr``); Mask R-CNN adds torchvision's reference warm-up:
    linear from 1/1000 of it over the first ``MASKRCNN_WARMUP_STEPS`` steps.
    """
    base = default_lr(args, world_size)
    if args.workload == "maskrcnn" and step < MASKRCNN_WARMUP_STEPS:
        alpha = step / MASKRCNN_WARMUP_STEPS
        return base * (MASKRCNN_WARMUP_FACTOR * (1 - alpha) + alpha)
    return base


MASKRCNN_WARMUP_STEPS = 1000  # torchvision references/detection: warmup_iters = min(1000, len(loader) - 1)
MASKRCNN_WARMUP_FACTOR = 1.0 / 1000


def set_lr(optimizer: Any, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def autocast_factory(precision: str, device_type: str) -> Callable[[], Any]:
    import torch

    if precision == "fp32":
        return nullcontext
    dtype = torch.float16 if precision == "amp-fp16" else torch.bfloat16
    return lambda: torch.autocast(device_type=device_type, dtype=dtype)
