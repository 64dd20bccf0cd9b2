"""The training loop: DDP, AMP, metrics lines, checkpoints and resume (``python -m workloads.train``).

Run under torchrun (RANK/WORLD_SIZE/LOCAL_RANK from the environment), or alone as one process.
Device: CUDA (nccl) when available, else CPU (gloo). On every (re)start the group loads
``checkpoints/latest.pt`` if present and continues from its step; rank 0 first drops the metric
lines the previous attempt wrote past that step, between two barriers, so no rank writes
until the files are consistent. The clock is read after a device sync, and checkpoint and
evaluation time are left out of the step times (they are recorded in events.jsonl).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any, Callable

from spec.train_args import TrainArgs, parse_train_args
from workloads.train import checkpoint as ckpt
from workloads.train.data import Position, epoch_ends, next_slice
from workloads.train.metrics import JsonLines, metrics_dir, prune_after


def dist_env(environ: dict[str, str]) -> dict[str, int]:
    get = lambda k, d: int(environ.get(k, d))  # noqa: E731
    return {"rank": get("RANK", 0), "world_size": get("WORLD_SIZE", 1), "local_rank": get("LOCAL_RANK", 0),
            "restart": get("TORCHELASTIC_RESTART_COUNT", 0)}


def default_lr(args: TrainArgs, world_size: int) -> float:
    if args.lr is not None:
        return args.lr
    gb = args.batch_size * world_size
    return 0.02 * gb / 16 if args.workload == "maskrcnn" else 0.1 * gb / 256


def autocast_factory(precision: str, device_type: str) -> Callable[[], Any]:
    import torch

    if precision == "fp32":
        return nullcontext
    dtype = torch.float16 if precision == "amp-fp16" else torch.bfloat16
    return lambda: torch.autocast(device_type=device_type, dtype=dtype)


class Run:
    """One attempt of the training job on one rank."""

    def __init__(self, args: TrainArgs, env: dict[str, int]):
        import torch
        import torch.distributed as dist

        self.args, self.env = args, env
        self.rank, self.world = env["rank"], env["world_size"]
        self.distributed = self.world > 1 or "MASTER_ADDR" in os.environ
        if torch.cuda.is_available():
            self.device = torch.device("cuda", env["local_rank"])
            torch.cuda.set_device(self.device)
            backend = "nccl"
        else:
            self.device = torch.device("cpu")
            backend = "gloo"
        if self.distributed:
            from datetime import timedelta

            dist.init_process_group(backend, timeout=timedelta(seconds=args.collective_timeout))
        self.autocast = autocast_factory(args.precision, self.device.type)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=args.precision == "amp-fp16")
        self.writer = ckpt.BackgroundWriter()
        self.loop_seconds = self.final_save_seconds = 0.0

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def build(self) -> None:
        import torch

        a = self.args
        torch.manual_seed(a.seed)
        if a.workload == "maskrcnn":
            from workloads.train.detection import detection_source
            from workloads.train.models import build_maskrcnn

            self.source = detection_source(a, device=self.device, rank=self.rank)
            model, self.backbone_file = build_maskrcnn(num_classes=self.source.num_classes,
                                                       image_size=a.image_size, data_dir=a.data_dir)
            self.loss_fn = lambda m, x, y: sum(m(x, y).values())
        else:
            self.source = self._classification_source()
            from workloads.train.models import build_classifier

            model = build_classifier(a.workload, num_classes=self.num_classes, width_per_group=a.width_per_group)
            ce = torch.nn.CrossEntropyLoss()
            self.loss_fn = lambda m, x, y: ce(m(x), y)
        model = model.to(self.device)
        if a.channels_last and a.workload != "maskrcnn":
            model = model.to(memory_format=torch.channels_last)
        self.model = model  # the bare module: what checkpoints hold
        wrapped = model
        if self.distributed:
            from torch.nn.parallel import DistributedDataParallel as DDP

            wrapped = DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.train_model = torch.compile(wrapped) if a.compile else wrapped
        self.lr = default_lr(a, self.world)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=self.lr, momentum=0.9, weight_decay=1e-4)

    def _classification_source(self) -> Any:
        a = self.args
        if a.workload == "cifar10":
            from workloads.train.cifar import CifarImages

            src = CifarImages(a.data_dir, device=self.device, channels_last=a.channels_last, seed=a.seed,
                              rank=self.rank, batch=a.batch_size)
            self.num_classes = len(src.classes)
            return src
        if a.dataset == "synthetic":
            from workloads.train.data import SyntheticImages

            self.num_classes = 1000
            return SyntheticImages(batch=a.batch_size, image_size=a.image_size, num_classes=1000,
                                   device=self.device, channels_last=a.channels_last, seed=a.seed + self.rank)
        from workloads.train.data import ImageFolderImages, image_folder_root

        src = ImageFolderImages(image_folder_root(a.data_dir, a.dataset), image_size=a.image_size,
                                device=self.device, channels_last=a.channels_last, workers=a.workers)
        self.num_classes = src.num_classes
        return src

    def resume(self, now: float) -> tuple[int, Position, float]:
        """Load the latest checkpoint (every rank) and make the metrics files agree with it."""
        import torch

        state = ckpt.load_latest(self.args.results_dir) if self.args.harness else None
        step, pos, started = 0, Position(), now
        if state is not None:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.scaler.load_state_dict(state["scaler"])
            step, pos, started = state["step"], Position(state["epoch"], state["offset"]), state["run_started_at"]
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
                              "dropped_lines": dropped, "wall_time": round(time.time(), 3)})
            self.barrier()
        return step, pos, started

    def save(self, step: int, pos: Position, started: float, events: JsonLines | None, *, wait: bool = False) -> None:
        """Rank 0: snapshot the state to CPU memory now, write it in the background (``wait``: to disk now)."""
        if not self.args.harness or self.rank != 0:
            return
        t0 = time.perf_counter()
        state = ckpt.to_cpu({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                             "scaler": self.scaler.state_dict()})
        state.update(step=step, epoch=pos.epoch, offset=pos.offset, run_started_at=started, world_size=self.world,
                     args=asdict(self.args), num_classes=getattr(self, "num_classes", None))
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
        """cifar10: rank 0 measures test accuracy at the end of each epoch."""
        if self.args.workload != "cifar10" or self.rank != 0 or evals is None:
            return
        from workloads.train.cifar import accuracy

        result = accuracy(self.model, self.args.data_dir, device=self.device, autocast=self.autocast)
        self.model.train()
        evals.write({"step": step, "epoch": epoch, "accuracy": result["accuracy"],
                     "elapsed_s": round(time.time() - started, 3), "wall_time": round(time.time(), 3)})

    def train(self) -> int:
        a = self.args
        step, pos, started = self.resume(time.time())
        print(f"[workloads.train] rank {self.rank}/{self.world} on {self.device} (restart {self.env['restart']}): "
              f"{a.workload} {'from step ' + str(step) if step else 'from scratch'}"
              + (f", backbone {getattr(self, 'backbone_file', None) or 'random init'}" if a.workload == "maskrcnn"
                 else ""), flush=True)
        mdir = metrics_dir(a.results_dir)
        lines = JsonLines(mdir / f"rank-{self.rank}.jsonl") if a.harness else None
        events = JsonLines(mdir / "events.jsonl") if a.harness and self.rank == 0 else None
        evals = JsonLines(mdir / "eval.jsonl") if a.harness and self.rank == 0 else None
        gb = a.batch_size * self.world
        size = self.source.size
        self.train_model.train()
        done_here, interval_steps = 0, 0
        self.sync()
        t_prev = loop_start = time.perf_counter()
        while True:
            if size is not None:
                start, after = next_slice(size, pos, gb)
                if a.by_epochs and start.epoch >= a.epochs:
                    break
            else:
                start, after = pos, pos
            if not a.by_epochs and step >= a.steps:
                break
            x, y = self.source.batch(start)
            with self.autocast():
                loss = self.loss_fn(self.train_model, x, y)
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            step, pos, done_here, interval_steps = step + 1, after, done_here + 1, interval_steps + 1
            ended = size is not None and epoch_ends(size, pos, gb)
            last = (not a.by_epochs and step >= a.steps) or (ended and a.by_epochs and pos.epoch + 1 >= a.epochs)
            if step % a.log_every == 0 or last:
                self.sync()
                t = time.perf_counter()
                if lines:
                    lines.write({"step": step, "epoch": start.epoch, "loss": round(float(loss.item()), 5),
                                 "samples": a.batch_size * interval_steps, "step_time_s": round(t - t_prev, 6),
                                 "samples_per_s": round(a.batch_size * interval_steps / (t - t_prev), 3),
                                 "wall_time": round(time.time(), 3), "world_size": self.world, "rank": self.rank,
                                 "restart": self.env["restart"], "warmup": done_here <= a.warmup_steps})
                t_prev, interval_steps = t, 0
            paused = False
            if ended:
                self.evaluate_epoch(step, pos.epoch, started, evals)
                paused = True
            if ckpt.is_due(step, a.checkpoint_every) and not last:
                self.save(step, pos, started, events)
                paused = True
            if paused:
                self.sync()
                t_prev = time.perf_counter()
        self.sync()
        t_end = time.perf_counter()
        self.loop_seconds = t_end - loop_start  # the steps (and in-loop checkpoints), not the final save
        self.save(step, pos, started, events, wait=True)
        self.final_save_seconds = time.perf_counter() - t_end
        for f in (lines, events, evals):
            if f:
                f.close()
        self.barrier()  # every rank's last line is on disk before rank 0 (and the launcher) finish
        return step

    def close(self) -> None:
        self.writer.close()
        if self.distributed:
            import torch.distributed as dist

            dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    args = parse_train_args(sys.argv[1:] if argv is None else argv)
    env = dist_env(dict(os.environ))
    run = Run(args, env)
    try:
        run.build()
        steps = run.train()
    finally:
        run.close()
    if env["rank"] == 0:
        print(f"[workloads.train] {args.workload}: finished at step {steps} (world size {env['world_size']}), "
              f"loop {run.loop_seconds:.3f}s", flush=True)
    return 0
