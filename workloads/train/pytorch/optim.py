"""The optimizer the PyTorch workloads train with: SGD with momentum, fused on a GPU, its momentum buffers
seeded with zeros before the first step.

Why seeded. ``torch.optim.SGD(fused=True)`` tells GradScaler that it handles overflow itself
(``_step_supports_amp_scaling``), so the scaler passes ``found_inf`` into the step instead of skipping
it. On its first step the fused path allocates the momentum buffers with ``torch.empty_like``
(torch/optim/sgd.py, ``_fused_sgd``, ``is_first_step``; the same in torch 2.6 through 2.14), and the
kernel returns early when ``found_inf`` is set, leaving them uninitialised. amp-fp16's first steps
overflow at GradScaler's initial scale of 65536, so the first good step read garbage as momentum: NaN
weights from step 3 of ResNet-50 on an H100. With zeros already there, no step is a "first" step,
and the first good one computes ``buf = 0.9 * 0 + grad = grad``, exactly what a first step computes.

A checkpoint's optimizer state replaces the buffers on resume (it holds them); ``seed_momentum`` is
called again after loading, for one that does not. Horovod's ``DistributedOptimizer`` builds a new
optimizer from the param groups, so the trainer seeds the optimizer it finally steps.
"""

from __future__ import annotations

from typing import Any, Iterable

MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4


def seed_momentum(optimizer: Any) -> int:
    """Give every parameter of a momentum group that has no momentum buffer a zero one; how many were made."""
    import torch

    made = 0
    for group in optimizer.param_groups:
        if not group.get("momentum"):
            continue
        for p in group["params"]:
            state = optimizer.state[p]
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                made += 1
    return made


def sgd(params: Iterable[Any], *, lr: float, fused: bool, momentum: float = MOMENTUM,
        weight_decay: float = WEIGHT_DECAY) -> Any:
    """SGD with momentum (``fused``: one kernel for all parameters, on a GPU), momentum buffers seeded."""
    import torch

    optimizer = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                                **({"fused": True} if fused else {}))
    seed_momentum(optimizer)
    return optimizer
