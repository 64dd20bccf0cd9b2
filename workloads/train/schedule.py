"""What a training step is run with: the process's place in the job, the learning rate, precision.

``dist_env`` reads torchrun's environment; ``default_lr`` is the workload's linear scaling rule
(``spec.workload_facts``: 0.1 per 256 images of global batch; Mask R-CNN 0.02 per 16), and
``lr_at`` adds its warm-up (Mask R-CNN: torchvision's detection reference); ``set_lr`` applies a
rate after a checkpoint restored the old world's;
``autocast_factory`` gives the precision's autocast context. torch is imported inside.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable

from spec.train_args import TrainArgs
from spec.workload_facts import WORKLOADS


def dist_env(environ: dict[str, str]) -> dict[str, int]:
    get = lambda k, d: int(environ.get(k, d))  # noqa: E731
    return {"rank": get("RANK", 0), "world_size": get("WORLD_SIZE", 1), "local_rank": get("LOCAL_RANK", 0),
            "restart": get("TORCHELASTIC_RESTART_COUNT", 0)}


def default_lr(args: TrainArgs, world_size: int) -> float:
    if args.lr is not None:
        return args.lr
    gb = args.batch_size * world_size
    facts = WORKLOADS[args.workload]
    return facts.base_lr * gb / facts.lr_batch


def lr_at(args: TrainArgs, world_size: int, step: int) -> float:
    """The learning rate for global step ``step`` (0-based) in a world of ``world_size`` processes.

    The linear scaling rule (``default_lr``), with the workload's warm-up where it has one (Mask
    R-CNN: torchvision's reference, linear from 1/1000 of it over the first 1000 steps).
    """
    base = default_lr(args, world_size)
    facts = WORKLOADS[args.workload]
    if step < facts.warmup_steps:
        alpha = step / facts.warmup_steps
        return base * (facts.warmup_factor * (1 - alpha) + alpha)
    return base


MASKRCNN_WARMUP_STEPS = WORKLOADS["maskrcnn"].warmup_steps  # the tests' name for it


def set_lr(optimizer: Any, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def autocast_factory(precision: str, device_type: str) -> Callable[[], Any]:
    import torch

    if precision == "fp32":
        return nullcontext
    dtype = torch.float16 if precision == "amp-fp16" else torch.bfloat16
    return lambda: torch.autocast(device_type=device_type, dtype=dtype)
