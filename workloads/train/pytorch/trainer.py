"""The training loop: DDP, AMP, metrics lines, checkpoints and resume (``python -m workloads.train.pytorch``).

Run under torchrun (RANK/WORLD_SIZE/LOCAL_RANK from the environment), or alone as one process.
Device: CUDA (nccl) when available, else CPU (gloo). On every (re)start the group loads
``checkpoints/latest.pt`` if present and continues from its step; rank 0 first drops the metric
lines the previous attempt wrote past that step, between two barriers, so no rank writes
until the files are consistent.

Timing. A metrics line covers an interval of steps, closed (device sync, one ``.item()``)
every ``--log-every`` steps, at the last step, at the end of warm-up (so no line mixes warm-up
and compile time with steady steps) and before every pause (checkpoint, evaluation). Each line
also lists its steps' own durations, from CUDA events on a GPU (no host sync per step) or the
host clock on a CPU, for step-time percentiles. After a pause every rank meets in a barrier
before the clock restarts, so no rank's next interval contains the time it spent waiting for
rank 0's checkpoint or evaluation. Checkpoints come every ``--checkpoint-minutes`` of wall
time (rank 0's clock, agreed at line boundaries) and/or every ``--checkpoint-every`` steps, and
at the end; with both 0, never (no ``checkpoints/`` folder at all).
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict
from typing import Any

from core.catalog.workload_facts import WORKLOADS as WORKLOAD_FACTS
from core.contract.names import ENV_LAUNCHED_AT
from core.contract.strict_json import nonfinite_name
from core.contract.train_args import TrainArgs, parse_train_args
from workloads.train.common.cpu_choice import channels_last_for, precision_on
from workloads.train.common.data import Position, epoch_ends, next_step
from workloads.train.common.device import StepClock, device_info
from workloads.train.common.metrics import JsonLines, metrics_dir, prune_after
from workloads.train.common.schedule import (
    autocast_factory,
    dist_env,
    lr_at,
    set_lr,
    warmup_samples,
)
from workloads.train.common.startup import compile_share, startup_event
from workloads.train.pytorch import checkpoint as ckpt
from workloads.train.pytorch.optim import seed_momentum, sgd
from workloads.train.pytorch.registry import WORKLOADS as WORKLOAD_CODE



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

class Run:
    """One attempt of the training job on one rank."""

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
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "amp-fp16")
        self.samples_seen = 0  # samples trained by the whole job so far (the large-batch warm-up's clock)
        self.skipped_steps: Any = None  # amp-fp16: steps GradScaler skipped, a device tensor (scaler_step)
        self.diverged: dict[str, Any] | None = None  # the step and reason a non-finite loss ended the run
        self.writer = ckpt.BackgroundWriter()
        self.loop_seconds = self.final_save_seconds = 0.0

    # How the ranks talk: torch.distributed with DDP here; workloads.train.horovod.trainer overrides these
    # few methods with Horovod's (the loop, metrics, checkpoints and summary stay this class's).
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
        self.scaler_step()

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

    def build(self) -> None:
        import torch

        a = self.args
        torch.manual_seed(a.seed)
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

    def resume(self, now: float) -> tuple[int, Position, float]:
        """Load the latest checkpoint (every rank) and make the metrics files agree with it."""
        import torch

        state = ckpt.load_latest(self.args.results_dir) if self.args.harness else None
        changed = ckpt.arguments_changed((state or {}).get("args"), asdict(self.args))
        if changed:
            raise RuntimeError(f"{ckpt.latest_path(self.args.results_dir)} was written by a run with other arguments "
                               f"({'; '.join(changed)}); it is never resumed: use a new run id")
        step, pos, started = 0, Position(), now
        gb, size = self.args.batch_size * self.world, self.source.size
        self.samples_seen = 0
        if state is not None:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            seed_momentum(self.optimizer)  # a checkpoint taken before any step holds no buffers
            self.scaler.load_state_dict(state["scaler"])
            step, pos, started = state["step"], Position(state["epoch"], state["offset"]), state["run_started_at"]
            # samples trained so far, counted across elastic resizes (older checkpoints: from the position)
            self.samples_seen = state.get("samples_seen") or (pos.epoch * size + pos.offset if size else step * gb)
        # load_state_dict restored the saved world's learning rate: set the one for this world.
        saved_world = state.get("world_size") if state is not None else None
        self.lr = lr_at(self.args, self.world, step, samples=self.samples_seen, size=size)
        set_lr(self.optimizer, self.lr)
        # RNG: a deterministic function of (seed, rank, step), which stays meaningful when the world size changes.
        torch.manual_seed(self.args.seed * 7919 + self.rank * 104_729 + step)
        if hasattr(self.source, "reseed"):
            self.source.reseed(self.args.seed * 7919 + self.rank * 104_729 + step)
        if hasattr(self.source, "start"):
            self.source.start(pos, global_batch=self.args.batch_size * self.world, rank=self.rank,
                              batch=self.args.batch_size, seed=self.args.seed)
        if self.args.harness:
            self.barrier()
            if self.rank == 0:
                dropped = prune_after(self.args.results_dir, step)
                with JsonLines(metrics_dir(self.args.results_dir) / "events.jsonl") as ev:
                    ev.write({"event": "resume" if state is not None else "start", "step": step,
                              "restart": self.env["restart"], "world_size": self.world,
                              "saved_world_size": saved_world, "lr": self.lr,
                              "dropped_lines": dropped, "wall_time": round(time.time(), 3)})
                    ev.write({"event": "run_info", "step": step, "restart": self.env["restart"],
                              **self.run_info(), "wall_time": round(time.time(), 3)})
            self.barrier()
        return step, pos, started

    def save(self, step: int, pos: Position, started: float, events: JsonLines | None, *, wait: bool = False) -> None:
        """Rank 0: snapshot the state to CPU memory now, write it in the background (``wait``: to disk now).
        Nothing when the run keeps no checkpoints (both checkpoint settings 0, ``checkpoint.enabled``)."""
        if not self.args.harness or self.rank != 0 or \
                not ckpt.enabled(self.args.checkpoint_every, self.args.checkpoint_minutes):
            return
        t0 = time.perf_counter()
        state = ckpt.to_cpu({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                             "scaler": self.scaler.state_dict()})
        state.update(step=step, epoch=pos.epoch, offset=pos.offset, run_started_at=started, world_size=self.world,
                     samples_seen=self.samples_seen,
                     args=asdict(self.args), num_classes=getattr(self, "num_classes", None), lr=self.lr,
                     saved_at=round(time.time(), 3))
        info = {"event": "checkpoint", "step": step, "snapshot_s": round(time.perf_counter() - t0, 4)}
        done = [self.writer.submit(self.args.results_dir, state, info)]
        if wait:
            done.append(self.writer.wait())
        for d in done:
            if d and events:
                events.write({**d, "wall_time": round(time.time(), 3)})

    def sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def evaluate_epoch(self, step: int, epoch: int, started: float, evals: JsonLines | None) -> None:
        """A workload that evaluates (core.catalog.workload_facts): rank 0 measures test accuracy at the end of each epoch."""
        if not self.facts.evaluates or self.rank != 0 or evals is None:
            return
        result = self.code.evaluate(self.model, self.args.data_dir, device=self.device, autocast=self.autocast)
        self.model.train()
        evals.write({"step": step, "epoch": epoch, "accuracy": result["accuracy"],
                     "elapsed_s": round(time.time() - started, 3), "wall_time": round(time.time(), 3)})

    def run_info(self) -> dict[str, Any]:
        """What the summary needs about this attempt: shape, device, model FLOPs (rank 0, once per attempt)."""
        local = self.local_world_size()
        flops, note = self.count_flops()
        cuda = self.device.type == "cuda"
        gb, size = self.args.batch_size * self.world, self.source.size
        return {"world_size": self.world, "nodes": max(1, self.world // max(local, 1)),
                "gpus_per_node": local if cuda else 0, "processes_per_node": local,
                "device": device_info(self.device, self.world), "flops_per_sample": flops, "flops_note": note,
                "precision": self.precision, "requested_precision": self.args.precision, "lr": self.lr,
                # samples trained per epoch (an epoch's incomplete last batch is dropped); None: no epochs
                "samples_per_epoch": size // gb * gb if size else None,
                "memory_format": "channels_last" if self.channels_last else "contiguous"}

    def count_flops(self) -> tuple[float | None, str | None]:
        """``measure_flops``, once per attempt: the trainer counts before ``resume`` (its own start-up phase,
        ``flops``), and ``run_info`` reads the count then."""
        if getattr(self, "_flops", None) is None:
            self._flops = self.measure_flops()
        return self._flops

    def measure_flops(self) -> tuple[float | None, str | None]:
        """Training FLOPs per sample (forward + backward), counted by FlopCounterMode over two samples / 2 on
        the meta device: a model of the same shape with no storage (``flops_model``) and inputs with none,
        so nothing runs on the device (on a GPU the real count ran cuDNN autotuning for shapes used once,
        about 3 s), the trained model's weights, statistics and gradients stay untouched, and the count is
        the same (FlopCounterMode counts from shapes; tests/workloads/train/test_startup.py)."""
        if not self.facts.classifier:  # Mask R-CNN
            return None, "Mask R-CNN's FLOPs depend on each image's size and proposals; not counted"
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        size = self.facts.flops_image_size or self.args.image_size
        meta = torch.device("meta")
        model = self.flops_model(meta).train()
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        if self.channels_last:
            model = model.to(memory_format=fmt)
        x = torch.empty(2, 3, size, size, device=meta).contiguous(memory_format=fmt)
        y = torch.zeros(2, dtype=torch.long, device=meta)
        counter = FlopCounterMode(display=False)
        with counter:
            torch.nn.functional.cross_entropy(model(x), y).backward()
        return counter.get_total_flops() / 2, "torch.utils.flop_counter.FlopCounterMode, forward + backward"

    def flops_model(self, device: Any) -> Any:
        """The trained model's architecture on ``device`` (the meta device: shapes, no storage), built from
        the workload's factory under ``torch.device`` (no copy of the weights, no initialisation work);
        a workload without a factory: a deep copy moved there."""
        import torch

        if self.code.model is not None and getattr(self, "num_classes", None):
            with torch.device(device):
                return self.code.model(self.num_classes, self.args.width_per_group)
        import copy

        return copy.deepcopy(self.model).to(device)

    def startup_record(self, events: JsonLines, step: int, done_here: int, first_done: float | None,
                       compiled: bool) -> float | None:
        """Rank 0, after this attempt's first steps: write the ``startup`` event (eager: after the first step;
        compiled: after the second, with the first step's extra time as the ``compile`` phase). Returns the
        first step's end (wall clock)."""
        if done_here == 1:
            self.sync()
            first_done = time.time()
            if not compiled:
                events.write(startup_event(self.marks, first_done, step=step, restart=self.env["restart"]))
            return first_done
        compile_s = None
        if compiled:
            self.sync()
            first_s = first_done - self.marks["resumed"]
            compile_s = compile_share(first_s, time.time() - first_done)
            step -= 1
        events.write(startup_event(self.marks, first_done, step=step, restart=self.env["restart"],
                                   compile_s=compile_s))
        return first_done

    def peak_memory_gib(self) -> float | None:
        if self.device.type != "cuda":
            return None
        import torch

        return round(torch.cuda.max_memory_allocated(self.device) / 2**30, 3)

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (one tiny all-reduce; called at line boundaries only)."""
        if not self.distributed:
            return flag
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def health(self, loss_value: float) -> dict[str, Any]:
        """A metrics line's numerical health: the loss (null when not finite, with why), and with amp-fp16 the
        loss scale and the steps GradScaler skipped so far."""
        out: dict[str, Any] = {"loss": round(loss_value, 5) if math.isfinite(loss_value) else None}
        if not math.isfinite(loss_value):
            out["nonfinite_loss"] = nonfinite_name(loss_value)
        if self.scaler.is_enabled():
            out["loss_scale"] = self.scaler.get_scale()
            out["skipped_steps"] = int(self.skipped_steps.item()) if self.skipped_steps is not None else 0
        return out

    def agreed(self, flag: bool) -> bool:
        """Rank 0's ``flag``, on every rank (one tiny broadcast; called at line boundaries only)."""
        if not self.distributed:
            return flag
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0], device=self.device)
        dist.broadcast(t, 0)
        return bool(t.item())

    def train(self) -> int:
        a = self.args
        if a.harness and self.rank == 0:  # what run_info reports, counted apart from the checkpoint's resume
            self.count_flops()
            self.marks["flops_counted"] = time.time()
        step, pos, started = self.resume(time.time())
        self.marks["resumed"] = time.time()
        first_step = step
        print(f"[workloads.train] rank {self.rank}/{self.world} on {self.device} (restart {self.env['restart']}): "
              f"{a.workload} {'from step ' + str(step) if step else 'from scratch'}, lr {self.lr:g}"
              + (f", {self.note}" if self.note else ""), flush=True)
        mdir = metrics_dir(a.results_dir)
        lines = JsonLines(mdir / f"rank-{self.rank}.jsonl") if a.harness else None
        events = JsonLines(mdir / "events.jsonl") if a.harness and self.rank == 0 else None
        evals = JsonLines(mdir / "eval.jsonl") if a.harness and self.rank == 0 else None
        gb = a.batch_size * self.world
        size = self.source.size
        evaluates = self.facts.evaluates and a.harness
        # a warm-up sets the rate every step: the workload's own, or the large-batch one (schedule.warmup_samples)
        warmup_lr = self.facts.warmup_steps > 0 or warmup_samples(a, self.world, size) > 0
        self.train_model.train()
        clock = StepClock(self.device)
        # A compiled model's first step holds the compile: the start-up record waits for the second step,
        # whose duration tells the first step's extra time (startup.compile_share).
        compiled, first_done = bool(a.compile), None
        done_here, interval_steps, data_wait = 0, 0, 0.0
        self.sync()
        t_prev = loop_start = last_checkpoint = time.perf_counter()
        clock.start()
        while (where := next_step(size, pos, gb, step, a)) is not None:
            start, after = where
            t0 = time.perf_counter()
            x, y = self.source.batch(start)
            data_wait += time.perf_counter() - t0
            if warmup_lr:
                self.lr = lr_at(a, self.world, step, samples=self.samples_seen, size=size)
                set_lr(self.optimizer, self.lr)
            with self.autocast():
                loss = self.loss_fn(self.train_model, x, y)
            # set_to_none is zero_grad's default (torch >= 2.0); not passed, because Horovod's
            # DistributedOptimizer.zero_grad takes no arguments (horovod/torch/optimizer.py).
            self.optimizer.zero_grad()
            self.backward_and_step(loss)
            clock.step()
            step, pos, done_here, interval_steps = step + 1, after, done_here + 1, interval_steps + 1
            self.samples_seen += gb
            if events and done_here <= (2 if compiled else 1):
                first_done = self.startup_record(events, step, done_here, first_done, compiled)
            ended = size is not None and epoch_ends(size, pos, gb)
            last = (not a.by_epochs and step >= a.steps) or (ended and a.by_epochs and pos.epoch + 1 >= a.epochs)
            warmup = done_here <= a.warmup_steps
            evaluate = ended and evaluates
            checkpoint = ckpt.is_due(step, a.checkpoint_every) and not last
            boundary = (step % a.log_every == 0 or last or done_here == a.warmup_steps or evaluate or checkpoint)
            if boundary:
                self.sync()
                t = time.perf_counter()
                loss_value = float(loss.item())
                # A non-finite loss on any rank ends the run on every rank: nothing after it is a result.
                diverged = self.any_rank(not math.isfinite(loss_value))
                if lines:
                    lines.write({"step": step, "epoch": start.epoch, **self.health(loss_value),
                                 "steps": interval_steps, "samples": a.batch_size * interval_steps,
                                 "step_time_s": round(t - t_prev, 6),
                                 "samples_per_s": round(a.batch_size * interval_steps / (t - t_prev), 3),
                                 "step_times_s": clock.durations(), "data_wait_s": round(data_wait, 6),
                                 "peak_memory_gib": self.peak_memory_gib(), "lr": self.lr,
                                 "wall_time": round(time.time(), 3), "world_size": self.world, "rank": self.rank,
                                 "restart": self.env["restart"], "warmup": warmup})
                t_prev, interval_steps, data_wait = t, 0, 0.0
                if diverged:
                    what = nonfinite_name(loss_value)
                    self.diverged = {"step": step, "reason": f"non-finite loss ({what}) at step {step}" if what
                                     else f"non-finite loss on another rank at step {step}"}
                    print(f"[workloads.train] rank {self.rank}: diverged: {self.diverged['reason']}; stopping, "
                          "the last checkpoint is kept", flush=True)
                    if events:
                        events.write({"event": "diverged", **self.diverged, "wall_time": round(time.time(), 3)})
                    break
                clock.start()
                if a.checkpoint_minutes > 0 and not last and not checkpoint:
                    checkpoint = self.agreed(t - last_checkpoint >= a.checkpoint_minutes * 60)
            if evaluate or checkpoint:
                if evaluate:
                    self.evaluate_epoch(step, pos.epoch, started, evals)
                if checkpoint:
                    self.save(step, pos, started, events)
                    last_checkpoint = time.perf_counter()
                # Every rank waits here for rank 0's pause, not inside the next step's all-reduce,
                # and restarts its clock after it: no rank's interval holds the pause.
                self.barrier()
                self.sync()
                t_prev = time.perf_counter()
                clock.start()
        if events and compiled and done_here == 1:  # one step only: no second step to tell the compile apart
            self.startup_record(events, step, 2, first_done, False)
        self.sync()
        t_end = time.perf_counter()
        self.loop_seconds = t_end - loop_start  # the steps (and in-loop checkpoints), not the final save
        if self.diverged is None:  # a diverged run's weights are not saved over its last good checkpoint
            self.save(step, pos, started, events, wait=True)
        self.final_save_seconds = time.perf_counter() - t_end
        if events:
            events.write({"event": "end", "step": step, "steps": step - first_step,
                          "samples": (step - first_step) * gb, "loop_seconds": round(self.loop_seconds, 4),
                          "final_save_s": round(self.final_save_seconds, 4), "restart": self.env["restart"],
                          "diverged": self.diverged is not None,
                          "world_size": self.world, "wall_time": round(time.time(), 3)})
        for f in (lines, events, evals):
            if f:
                f.close()
        self.barrier()  # every rank's last line is on disk before rank 0 (and the launcher) finish
        return step

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




def main(argv: list[str] | None = None, process_started: float | None = None, *, run_class: type[Run] = Run,
         env: dict[str, int] | None = None) -> int:
    """One rank's run; ``run_class`` and ``env`` (rank, world size, local rank, restart) are another
    framework's (workloads.train.horovod.trainer), else torchrun's from the environment."""
    args = parse_train_args(sys.argv[1:] if argv is None else argv)
    env = dist_env(dict(os.environ)) if env is None else env
    marks = {"process": process_started} if process_started else {}
    try:  # the launcher's start is this attempt's origin only for the first attempt (restarts are later)
        if env["restart"] == 0:
            marks["launched"] = float(os.environ[ENV_LAUNCHED_AT])
    except (KeyError, ValueError):
        pass
    run = run_class(args, env, marks)
    try:
        if run.code.run is not None:  # a workload with its own loop (workloads.train.pytorch.registry)
            steps = run.code.run(run)
        else:
            run.build()
            steps = run.train()
    finally:
        run.close()
    if env["rank"] == 0:
        ended = f"diverged at step {steps}" if getattr(run, "diverged", None) else f"finished at step {steps}"
        print(f"[workloads.train] {args.workload}: {ended} (world size {env['world_size']}), "
              f"loop {run.loop_seconds:.3f}s", flush=True)
    # 0 even when diverged: torchrun would restart the group on a failure and diverge again; the
    # "diverged" event is the record, and the results launcher turns it into the run's status and exit code.
    return 0
