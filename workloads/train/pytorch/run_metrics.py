"""What a PyTorch run records in its metrics files (``workloads.train.common.metrics``): each rank's lines, one per
interval of steps with its numerical health (the loss, GradScaler's scale and skipped steps); rank 0's events
(the start-up record, the run's shape and model FLOPs in ``run_info``, a divergence, the end) and its
evaluations at each epoch's end."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.contract.strict_json import nonfinite_name
from workloads.train.common.device import StepClock, device_info
from workloads.train.common.metrics import JsonLines, interval_line, metrics_dir
from workloads.train.common.startup import compile_share, startup_event


@dataclass
class MetricsFiles:
    """The metrics files one rank writes: its lines (every rank), the events and the evaluations (rank 0); None
    for each it does not write (a run without the results launcher writes none)."""

    lines: JsonLines | None
    events: JsonLines | None
    evals: JsonLines | None

    @classmethod
    def open(cls, results_dir: str | Path, rank: int, harness: bool) -> "MetricsFiles":
        mdir = metrics_dir(results_dir)
        return cls(JsonLines(mdir / f"rank-{rank}.jsonl") if harness else None,
                   JsonLines(mdir / "events.jsonl") if harness and rank == 0 else None,
                   JsonLines(mdir / "eval.jsonl") if harness and rank == 0 else None)

    def close(self) -> None:
        for f in (self.lines, self.events, self.evals):
            if f:
                f.close()


class RunMetrics:
    """``trainer.Run``'s records and the figures in them. They read the run's ``args``, ``env``, ``rank``,
    ``world``, ``device``, ``facts``, ``code``, ``model``, ``source``, ``scaler``, ``precision`` and ``marks``
    (``workloads.train.pytorch.run_setup``)."""

    def interval_line(self, *, step: int, epoch: int, loss_value: float, steps: int, seconds: float,
                      clock: StepClock, data_wait: float, warmup: bool) -> dict[str, Any]:
        """The metrics line of the ``steps`` steps that ended at ``step`` and took ``seconds`` (``data_wait`` of
        them waiting for batches), each step's own duration from ``clock``; ``warmup``: they are warm-up steps."""
        return interval_line(step=step, epoch=epoch, loss=loss_value, steps=steps,
                             samples_per_step=self.args.batch_size, seconds=seconds, step_times=clock.durations(),
                             data_wait=data_wait, lr=self.lr, world_size=self.world, rank=self.rank, warmup=warmup,
                             restart=self.env["restart"], peak_memory_gib=self.peak_memory_gib(),
                             loss_scale=self.loss_scale())

    def record_divergence(self, step: int, loss_value: float, events: JsonLines | None) -> None:
        """A non-finite loss (here, or on another rank) at ``step``: ``diverged`` says where and why, on stdout and
        as rank 0's ``diverged`` event."""
        what = nonfinite_name(loss_value)
        self.diverged = {"step": step, "reason": f"non-finite loss ({what}) at step {step}" if what
                         else f"non-finite loss on another rank at step {step}"}
        print(f"[workloads.train] rank {self.rank}: diverged: {self.diverged['reason']}; stopping, "
              "the last checkpoint is kept", flush=True)
        if events:
            events.write({"event": "diverged", **self.diverged, "wall_time": round(time.time(), 3)})

    def end_event(self, step: int, first_step: int, global_batch: int) -> dict[str, Any]:
        """Rank 0's ``end`` event: the steps and samples this attempt trained, its loop's time and the final save's."""
        return {"event": "end", "step": step, "steps": step - first_step,
                "samples": (step - first_step) * global_batch, "loop_seconds": round(self.loop_seconds, 4),
                "final_save_s": round(self.final_save_seconds, 4), "restart": self.env["restart"],
                "diverged": self.diverged is not None,
                "world_size": self.world, "wall_time": round(time.time(), 3)}

    def loss_scale(self) -> tuple[float, int] | None:
        """With amp-fp16, GradScaler's scale and the steps it skipped so far; None without a scaler."""
        if not self.scaler.is_enabled():
            return None
        return self.scaler.get_scale(), int(self.skipped_steps.item()) if self.skipped_steps is not None else 0

    def peak_memory_gib(self) -> float | None:
        if self.device.type != "cuda":
            return None
        import torch

        return round(torch.cuda.max_memory_allocated(self.device) / 2**30, 3)

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

    def evaluate_epoch(self, step: int, epoch: int, started: float, evals: JsonLines | None) -> None:
        """A workload that evaluates (core.catalog.workload_facts): rank 0 measures test accuracy at the end of each epoch."""
        if not self.facts.evaluates or self.rank != 0 or evals is None:
            return
        result = self.code.evaluate(self.model, self.args.data_dir, device=self.device, autocast=self.autocast)
        self.model.train()
        evals.write({"step": step, "epoch": epoch, "accuracy": result["accuracy"],
                     "elapsed_s": round(time.time() - started, 3), "wall_time": round(time.time(), 3)})

    def validate(self, step: int, started: float, evals: JsonLines | None) -> None:
        """A language model's validation loss (every rank: its parameters are sharded); rank 0 writes it."""
        self.lm.validate(self.train_model, self.autocast, step=step, tokens=self.samples_seen * self.lm.seq_len,
                         started=started, evals=evals, all_reduce_mean=self.mean_over_ranks)

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
                "memory_format": "channels_last" if self.channels_last else "contiguous",
                **(self.lm.info() if self.lm is not None else {})}

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
        if self.lm is not None:  # a language model: from its shape, per token
            return self.lm.flops_per_sample()
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
