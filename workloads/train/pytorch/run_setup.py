"""A PyTorch run's set-up and tear-down on one rank: the device (CUDA and nccl when there is one, else the CPU
and gloo) and the process group, the precision and memory format this device trains in, then the workload's
model, data source and optimizer (``build``); at the end, the data source's helpers, the checkpoint writer
and the process group are closed."""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from typing import Any

from core.catalog.workload_facts import WORKLOADS as WORKLOAD_FACTS
from core.contract.train_args import TrainArgs
from workloads.train.common.cpu_choice import channels_last_for, precision_on
from workloads.train.common.schedule import autocast_factory, lr_at
from workloads.train.pytorch import checkpoint as ckpt
from workloads.train.pytorch.optim import seed_momentum, sgd
from workloads.train.pytorch.registry import WORKLOADS as WORKLOAD_CODE


class RunSetup:
    """``trainer.Run``'s set-up (``__init__``, ``build``) and tear-down (``close``); the group joins and the model
    is wrapped through ``workloads.train.pytorch.collectives`` (``init_group``, ``distribute``)."""

    def __init__(self, args: TrainArgs, env: dict[str, int], marks: dict[str, float] | None = None):
        import torch

        self.args, self.env = args, env
        # Wall times of this attempt's start-up phases (rank 0 writes them after the first step).
        self.marks = {**(marks or {}), "imported": time.time()}
        self.rank, self.world = env["rank"], env["world_size"]
        self.distributed = self.world > 1 or "MASTER_ADDR" in os.environ
        if torch.cuda.is_available():
            self.device = torch.device("cuda", env["local_rank"])
            torch.cuda.set_device(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            backend = "nccl"
        else:
            self.device = torch.device("cpu")
            backend = "gloo"
        if self.distributed:
            self.init_group(backend)
        self.marks["process_group"] = time.time()
        # The memory format this device trains in (never channels_last on a CPU: workloads.train.common.cpu_choice).
        self.facts, self.code = WORKLOAD_FACTS[args.workload], WORKLOAD_CODE[args.workload]
        self.channels_last = channels_last_for(self.device.type, args.channels_last) and self.facts.classifier
        # The precision this device trains in: as asked on a GPU; on a CPU what that CPU runs fast
        # (cpu_choice), so a cluster Job's amp-fp16 never becomes fp16 autocast on CPU processes.
        self.precision = precision_on(self.device.type, args.precision)
        self.autocast = autocast_factory(self.precision, self.device.type)
        self.step_context = nullcontext  # what a step's loss and backward run in (a language model's loss parallelism)
        # A language model's parts (workloads.train.pytorch.language_model): its shape, mesh, data, state, validation
        self.lm = self.code.language_model(args, rank=self.rank, world=self.world, local_world=self.local_world_size(),
                                           precision=self.precision) if self.code.language_model else None
        # Which slice of the data this rank trains, and how many samples: a tensor-parallel group shares one
        self.data_rank = self.lm.data_rank if self.lm else self.rank
        self.data_batch = self.lm.data_batch if self.lm else args.batch_size
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "amp-fp16")
        self.samples_seen = 0  # samples trained by the whole job so far (the large-batch warm-up's clock)
        self.skipped_steps: Any = None  # amp-fp16: steps GradScaler skipped, a device tensor (scaler_step)
        self.diverged: dict[str, Any] | None = None  # the step and reason a non-finite loss ended the run
        self.writer = ckpt.BackgroundWriter()
        self.loop_seconds = self.final_save_seconds = 0.0

    def build(self) -> None:
        import torch

        a = self.args
        torch.manual_seed(a.seed)
        if self.lm is not None:
            self.build_language_model()
            return
        classifier = self.facts.classifier
        if self.device.type == "cuda" and classifier:
            torch.backends.cudnn.benchmark = True  # fixed input shapes: pick the fastest conv algorithms once
        built = self.code.build(a, self.device, self.rank, self.channels_last)
        self.source, self.loss_fn = built.source, built.loss_fn
        self.num_classes, self.note = built.num_classes, built.note
        model = built.model
        model = model.to(self.device)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model  # the bare module: what checkpoints hold
        wrapped = self.distribute(model)
        if a.compile:
            wrapped = torch.compile(wrapped, mode=None if a.compile_mode == "default" else a.compile_mode)
        self.train_model = wrapped
        self.lr = lr_at(a, self.world, 0, samples=0, size=self.source.size)
        # Fused on a GPU, momentum buffers seeded with zeros (workloads.train.pytorch.optim: the fused kernel otherwise
        # leaves them uninitialised when GradScaler skips the first steps), in the optimizer that steps.
        fused = self.device.type == "cuda"
        self.optimizer = self.distribute_optimizer(sgd(model.parameters(), lr=self.lr, fused=fused))
        seed_momentum(self.optimizer)
        self.marks["built"] = time.time()

    def build_language_model(self) -> None:
        """A language model parallelises itself (tensor parallel, FSDP2) and steps with AdamW; with FSDP2's
        mixed precision its steps need no autocast."""
        a = self.args
        from workloads.train.pytorch.language_model import lm_loss

        self.source, self.model = self.lm.build(self.device, self.distributed, a.compile)
        self.train_model, self.loss_fn, self.num_classes, self.note = self.model, lm_loss, None, self.lm.note()
        self.autocast = autocast_factory(self.lm.autocast_precision(), self.device.type)
        self.step_context = self.lm.step_context
        self.lr = lr_at(a, self.world, 0, samples=0, size=self.source.size)
        self.optimizer = self.lm.optimizer(self.model, self.lr, fused=self.device.type == "cuda")
        self.marks["built"] = time.time()

    def close_source(self) -> None:
        """Stop the data source's helpers now (loader workers; DALI's pipeline and reader processes), before the
        process group goes, rather than in the interpreter's teardown."""
        close = getattr(getattr(self, "source", None), "close", None)
        if close is not None:
            close()

    def close(self) -> None:
        try:
            self.close_source()
        finally:
            self.writer.close()
            if self.distributed:
                import torch.distributed as dist

                dist.destroy_process_group()
