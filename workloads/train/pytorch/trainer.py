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

This module is the loop (``Run.train``, as a short list of steps); the rest of a run lives beside it, as the
parts ``Run`` is made of: its set-up and tear-down (``run_setup``), how its ranks talk (``collectives``), its
checkpoints (``checkpoint.Checkpointing``) and what it records (``run_metrics``).
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from core.contract.names import ENV_LAUNCHED_AT
from core.contract.train_args import parse_train_args
from workloads.train.common.data import Position, epoch_ends, next_step
from workloads.train.common.device import StepClock
from workloads.train.common.schedule import dist_env, lr_at, set_lr, warmup_samples
from workloads.train.pytorch import checkpoint as ckpt
from workloads.train.pytorch.collectives import Collectives
from workloads.train.pytorch.run_metrics import MetricsFiles, RunMetrics
from workloads.train.pytorch.run_setup import RunSetup


@dataclass
class Loop:
    """Where one attempt's loop is: its step and data position, the run's start (``run_started_at``, kept across
    restarts), the step it started at, and the open interval (its steps, their wait for data, its start)."""

    step: int
    pos: Position
    started: float
    first_step: int
    global_batch: int
    size: int | None
    clock: StepClock
    compiled: bool  # a compiled model's first step holds the compile (startup_record)
    done_here: int = 0  # steps this attempt took
    interval_steps: int = 0
    data_wait: float = 0.0
    first_done: float | None = None  # the wall clock at the end of this attempt's first step
    t_prev: float = 0.0  # the open interval's start (perf_counter)
    last_checkpoint: float = 0.0


class Run(RunSetup, Collectives, ckpt.Checkpointing, RunMetrics):
    """One attempt of the training job on one rank."""

    def train(self) -> int:
        """Step until the schedule ends (or the loss diverges), closing an interval into a metrics line at each
        boundary and pausing for evaluation and checkpoints where they are due; then the final save."""
        a = self.args
        step, pos, started = self.start_attempt()
        files = MetricsFiles.open(a.results_dir, self.rank, a.harness)
        size = self.source.size
        evaluates = self.facts.evaluates and a.harness
        # a warm-up sets the rate every step: the workload's own, or the large-batch one (schedule.warmup_samples)
        warmup_lr = self.facts.warmup_steps > 0 or warmup_samples(a, self.world, size) > 0
        self.train_model.train()
        # A compiled model's first step holds the compile: the start-up record waits for the second step,
        # whose duration tells the first step's extra time (startup.compile_share).
        loop = Loop(step, pos, started, first_step=step, global_batch=a.batch_size * self.world, size=size,
                    clock=StepClock(self.device), compiled=bool(a.compile))
        self.sync()
        loop.t_prev = loop_start = loop.last_checkpoint = time.perf_counter()
        loop.clock.start()
        while (where := next_step(loop.size, loop.pos, loop.global_batch, loop.step, a)) is not None:
            start, after = where
            loss = self.train_step(loop, start, after, warmup_lr)
            if files.events and loop.done_here <= (2 if loop.compiled else 1):
                loop.first_done = self.startup_record(files.events, loop.step, loop.done_here, loop.first_done,
                                                      loop.compiled)
            ended = loop.size is not None and epoch_ends(loop.size, loop.pos, loop.global_batch)
            last = ((not a.by_epochs and loop.step >= a.steps)
                    or (ended and a.by_epochs and loop.pos.epoch + 1 >= a.epochs))
            warmup = loop.done_here <= a.warmup_steps
            evaluate = ended and evaluates
            validate = self.lm is not None and a.harness and self.lm.due(loop.step, last)
            checkpoint = ckpt.is_due(loop.step, a.checkpoint_every) and not last
            boundary = (loop.step % a.log_every == 0 or last or loop.done_here == a.warmup_steps or evaluate
                        or checkpoint or validate)
            if boundary:
                if self.close_interval(loop, files, loss, start.epoch, warmup):
                    break  # diverged
                if a.checkpoint_minutes > 0 and not last and not checkpoint:
                    checkpoint = self.agreed(loop.t_prev - loop.last_checkpoint >= a.checkpoint_minutes * 60)
            if evaluate or checkpoint or validate:
                self.pause(loop, files, evaluate, checkpoint, validate)
        self.finish(loop, files, loop_start)
        return loop.step

    def start_attempt(self) -> tuple[int, Position, float]:
        """Count the model's FLOPs (rank 0), resume from the latest checkpoint, and say where this rank starts:
        the step, the data position and the run's start (``resume``'s)."""
        a = self.args
        if a.harness and self.rank == 0:  # what run_info reports, counted apart from the checkpoint's resume
            self.count_flops()
            self.marks["flops_counted"] = time.time()
        step, pos, started = self.resume(time.time())
        self.marks["resumed"] = time.time()
        print(f"[workloads.train] rank {self.rank}/{self.world} on {self.device} (restart {self.env['restart']}): "
              f"{a.workload} {'from step ' + str(step) if step else 'from scratch'}, lr {self.lr:g}"
              + (f", {self.note}" if self.note else ""), flush=True)
        return step, pos, started

    def train_step(self, loop: Loop, start: Position, after: Position, warmup_lr: bool) -> Any:
        """One step on the batch at ``start`` (its learning rate first, in a warm-up); the loss, on the device."""
        a = self.args
        t0 = time.perf_counter()
        x, y = self.source.batch(start)
        loop.data_wait += time.perf_counter() - t0
        if warmup_lr:
            self.lr = lr_at(a, self.world, loop.step, samples=self.samples_seen, size=loop.size)
            set_lr(self.optimizer, self.lr)
        # A tensor-parallel language model's loss and backward read vocabulary-sharded logits (loss parallelism)
        with self.step_context():
            with self.autocast():
                loss = self.loss_fn(self.train_model, x, y)
            # set_to_none is zero_grad's default (torch >= 2.0); not passed, because Horovod's
            # DistributedOptimizer.zero_grad takes no arguments (horovod/torch/optimizer.py).
            self.optimizer.zero_grad()
            self.backward_and_step(loss)
        loop.clock.step()
        loop.step, loop.pos, loop.done_here = loop.step + 1, after, loop.done_here + 1
        loop.interval_steps += 1
        self.samples_seen += loop.global_batch
        return loss

    def close_interval(self, loop: Loop, files: MetricsFiles, loss: Any, epoch: int, warmup: bool) -> bool:
        """Close the open interval (one device sync, one ``.item()``) into a metrics line and open the next;
        True when the loss diverged on any rank, which ends the run on every rank: nothing after it is a result."""
        self.sync()
        t = time.perf_counter()
        loss_value = float(loss.item())
        diverged = self.any_rank(not math.isfinite(loss_value))
        if files.lines:
            files.lines.write(self.interval_line(step=loop.step, epoch=epoch, loss_value=loss_value,
                                                 steps=loop.interval_steps, seconds=t - loop.t_prev,
                                                 clock=loop.clock, data_wait=loop.data_wait, warmup=warmup))
        loop.t_prev, loop.interval_steps, loop.data_wait = t, 0, 0.0
        if diverged:
            self.record_divergence(loop.step, loss_value, files.events)
            return True
        loop.clock.start()
        return False

    def pause(self, loop: Loop, files: MetricsFiles, evaluate: bool, checkpoint: bool, validate: bool = False) -> None:
        """Evaluate (at an epoch's end), validate a language model (every rank) and checkpoint (rank 0), then
        restart every rank's clock together."""
        if evaluate:
            self.evaluate_epoch(loop.step, loop.pos.epoch, loop.started, files.evals)
        if validate:
            self.validate(loop.step, loop.started, files.evals)
        if checkpoint:
            self.save(loop.step, loop.pos, loop.started, files.events)
            loop.last_checkpoint = time.perf_counter()
        # Every rank waits here for rank 0's pause, not inside the next step's all-reduce,
        # and restarts its clock after it: no rank's interval holds the pause.
        self.barrier()
        self.sync()
        loop.t_prev = time.perf_counter()
        loop.clock.start()

    def finish(self, loop: Loop, files: MetricsFiles, loop_start: float) -> None:
        """The loop's time, the final save (not over a diverged run's last good checkpoint), the ``end`` event;
        every rank's last line is on disk before rank 0 (and the launcher) finish."""
        if files.events and loop.compiled and loop.done_here == 1:  # one step: no second one to tell the compile apart
            self.startup_record(files.events, loop.step, 2, loop.first_done, False)
        self.sync()
        t_end = time.perf_counter()
        self.loop_seconds = t_end - loop_start  # the steps (and in-loop checkpoints), not the final save
        if self.diverged is None:  # a diverged run's weights are not saved over its last good checkpoint
            self.save(loop.step, loop.pos, loop.started, files.events, wait=True)
        self.final_save_seconds = time.perf_counter() - t_end
        if files.events:
            files.events.write(self.end_event(loop.step, loop.first_step, loop.global_batch))
        files.close()
        self.barrier()


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
