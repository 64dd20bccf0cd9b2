"""How the ranks of a PyTorch run talk, and wait for their device: torch.distributed with DDP (the process
group, the model and optimizer the steps run, backward and the optimizer step, barriers, the one-flag
all-reduce and broadcast at line boundaries). ``workloads.train.horovod.trainer`` overrides these few
methods with Horovod's; the loop, metrics, checkpoints and summary stay ``trainer.Run``'s."""

from __future__ import annotations

import os
from typing import Any


def no_forward_buffer_sync(ddp: Any) -> dict[str, bool]:
    """DDP's argument that keeps buffers (BatchNorm's running statistics) per rank instead of broadcasting
    rank 0's at every forward: ``forward_sync_buffers=False`` where ``ddp`` has it (torch 2.13 and later,
    which deprecate ``broadcast_buffers`` with a FutureWarning), else ``broadcast_buffers=False`` (the
    cluster's images run torch 2.10 and 2.6, which know only that one).

    The two differ at construction only: ``forward_sync_buffers=False`` still broadcasts rank 0's buffers
    once when DDP is built, ``broadcast_buffers=False`` did not. Here every rank builds its model from the
    same seed and loads the same checkpoint after DDP is built, so the buffers are equal at that point and
    the broadcast changes no value (torch/nn/parallel/distributed.py, DistributedDataParallel.__init__)."""
    import inspect

    name = "forward_sync_buffers" if "forward_sync_buffers" in inspect.signature(ddp).parameters else \
        "broadcast_buffers"
    return {name: False}


class Collectives:
    """The ``trainer.Run`` methods that talk to the other ranks (and ``sync``, to the device). They read the
    run's ``args``, ``device``, ``distributed``, ``facts``, ``scaler``, ``optimizer`` and ``skipped_steps``,
    set up by ``workloads.train.pytorch.run_setup``."""

    def init_group(self, backend: str) -> None:
        from datetime import timedelta

        import torch.distributed as dist

        dist.init_process_group(backend, timeout=timedelta(seconds=self.args.collective_timeout))

    def distribute(self, model: Any) -> Any:
        """The model the steps run: DDP around ``model`` when distributed."""
        if not self.distributed:
            return model
        from torch.nn.parallel import DistributedDataParallel as DDP

        # Gradients live in the all-reduce buckets (no copy); buffers (BN statistics) stay per rank
        # instead of a broadcast every forward; a classifier's graph is the same every step.
        return DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                   gradient_as_bucket_view=True, **no_forward_buffer_sync(DDP),
                   static_graph=self.facts.classifier and not self.args.compile)

    def distribute_optimizer(self, optimizer: Any) -> Any:
        return optimizer  # DDP all-reduces in backward

    def backward_and_step(self, loss: Any) -> None:
        self.scaler.scale(loss).backward()
        self.clip_gradients()
        self.scaler_step()

    def clip_gradients(self) -> None:
        """The workload's gradient clipping (``max_grad_norm``: a language model's 1.0), on unscaled gradients:
        ``clip_grad_norm_`` reduces the norm over a sharded model's DTensor gradients itself."""
        norm = self.facts.max_grad_norm
        if not norm:
            return
        import torch

        if self.scaler.is_enabled():
            self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), norm, foreach=self.device.type == "cuda")

    def scaler_step(self) -> None:
        """GradScaler's step and update; with amp-fp16, count the steps it skipped (an inf or NaN gradient
        halves the scale) on the device, read at line boundaries only."""
        if not self.scaler.is_enabled():
            self.optimizer.step()
            return
        # GradScaler keeps its scale as the device tensor ``_scale`` (torch/amp/grad_scaler.py, since 1.6);
        # comparing it before and after update() counts a skip without a host sync.
        before = self.scaler._scale.clone()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        skipped = self.scaler._scale < before
        self.skipped_steps = skipped.int() if self.skipped_steps is None else self.skipped_steps + skipped

    def local_world_size(self) -> int:
        return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (one tiny all-reduce; called at line boundaries only)."""
        if not self.distributed:
            return flag
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def mean_over_ranks(self, value: float) -> float:
        """``value`` averaged over every rank (one tiny all-reduce; a validation's loss)."""
        if not self.distributed:
            return value
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return float(t.item()) / self.world

    def agreed(self, flag: bool) -> bool:
        """Rank 0's ``flag``, on every rank (one tiny broadcast; called at line boundaries only)."""
        if not self.distributed:
            return flag
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0], device=self.device)
        dist.broadcast(t, 0)
        return bool(t.item())
