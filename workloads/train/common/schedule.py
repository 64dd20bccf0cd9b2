"""What a training step is run with: the process's place in the job, the learning rate, precision.

``dist_env`` reads torchrun's environment; ``default_lr`` is the workload's linear scaling rule
(``core.catalog.workload_facts``: 0.1 per 256 images of global batch; Mask R-CNN 0.02 per 16), and
``lr_at`` adds its warm-up (Mask R-CNN: torchvision's detection reference; large global batches:
Goyal et al. 2017's gradual warm-up); ``set_lr`` applies a
rate after a checkpoint restored the old world's;
``autocast_factory`` gives the precision's autocast context. torch is imported inside.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable

from core.catalog.workload_facts import WORKLOADS
from core.contract.train_args import TrainArgs


def dist_env(environ: dict[str, str]) -> dict[str, int]:
    get = lambda k, d: int(environ.get(k, d))  # noqa: E731
    return {"rank": get("RANK", 0), "world_size": get("WORLD_SIZE", 1), "local_rank": get("LOCAL_RANK", 0),
            "restart": get("TORCHELASTIC_RESTART_COUNT", 0)}


def default_lr(args: TrainArgs, world_size: int) -> float:
    if args.lr is not None:
        return args.lr
    gb = args.batch_size * world_size
    facts = WORKLOADS[args.workload]
    if not facts.lr_batch:  # a language model: its rate, whatever the batch (core.catalog.workload_facts)
        return facts.base_lr
    return facts.base_lr * gb / facts.lr_batch


def warmup_steps(args: TrainArgs) -> int:
    """The workload's own warm-up in steps: its facts' length, which a language model caps at a tenth of a run by
    steps (a 30-step local run of llama3 would otherwise never leave its 200-step warm-up)."""
    facts = WORKLOADS[args.workload]
    if facts.language_model and not args.by_epochs:
        return min(facts.warmup_steps, max(1, args.steps // 10))
    return facts.warmup_steps


# The large-batch warm-up (Goyal et al. 2017, "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour",
# arXiv:1706.02677, section 2.2 "Gradual warmup"): with the linear scaling rule's lr = 0.1 x kn/256, start
# at 0.1 (the rule's lr at 256) and raise it by a constant amount each iteration to the scaled lr after
# 5 epochs; without it their large-batch runs trained worse from the start. Applied above a global batch of
# 1024 (4 x the rule's 256, an lr of 0.4), where the scaled lr leaves the range small-batch recipes use.
WARMUP_ABOVE_BATCH = 1024
WARMUP_EPOCHS = 5


def warmup_samples(args: TrainArgs, world_size: int, size: int | None = None) -> int:
    """How many samples the large-batch warm-up lasts for this global batch (0: none). ``size``: the
    dataset's epoch, else the workload's reference epoch (synthetic data). Not when ``--lr`` is given
    (the user chose the rate) nor for a workload with a warm-up of its own."""
    facts = WORKLOADS[args.workload]
    epoch = size or facts.epoch_samples
    if args.lr is not None or facts.warmup_steps or not facts.classifier or not epoch:
        return 0
    return WARMUP_EPOCHS * epoch if args.batch_size * world_size > WARMUP_ABOVE_BATCH else 0


def lr_at(args: TrainArgs, world_size: int, step: int, *, samples: int | None = None,
          size: int | None = None) -> float:
    """The learning rate for global step ``step`` (0-based) in a world of ``world_size`` processes, after
    ``samples`` samples trained (default: ``step`` steps of this world's global batch; the trainer counts
    them across elastic resizes) of a dataset of ``size`` samples an epoch.

    The linear scaling rule (``default_lr``), with the workload's warm-up where it has one (Mask
    R-CNN: torchvision's reference, linear from 1/1000 of it over the first 1000 steps), else the
    large-batch warm-up above ``WARMUP_ABOVE_BATCH`` (linear from the rule's lr at its reference batch).
    """
    base = default_lr(args, world_size)
    facts = WORKLOADS[args.workload]
    own = warmup_steps(args)
    if step < own:
        alpha = step / own
        return base * (facts.warmup_factor * (1 - alpha) + alpha)
    length = warmup_samples(args, world_size, size)
    seen = samples if samples is not None else step * args.batch_size * world_size
    if length and seen < length:
        return facts.base_lr + (base - facts.base_lr) * seen / length
    return base


def warmup_note(args: TrainArgs, world_size: int, size: int | None = None) -> str | None:
    """The schedule in one line, for the plan: None when there is no warm-up."""
    facts = WORKLOADS[args.workload]
    gb = args.batch_size * world_size
    if facts.warmup_steps and args.lr is None:
        rule = f" ({facts.base_lr:g} x {gb}/{facts.lr_batch})" if facts.lr_batch else ""
        return (f"lr {default_lr(args, world_size):g}{rule}, linear warm-up "
                f"from {facts.warmup_factor:g} x over the first {warmup_steps(args)} steps")
    length = warmup_samples(args, world_size, size)
    if not length:
        return None
    return (f"lr {default_lr(args, world_size):g} ({facts.base_lr:g} x {gb}/{facts.lr_batch}), linear warm-up from "
            f"{facts.base_lr:g} over {WARMUP_EPOCHS} epochs ({length:,} samples, {-(-length // gb):,} steps at this "
            f"batch) above a global batch of {WARMUP_ABOVE_BATCH} (Goyal et al. 2017)")


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
