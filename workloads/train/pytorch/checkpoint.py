"""Checkpoints: rank 0 writes ``<results-dir>/checkpoints/latest.pt`` atomically; every rank resumes from it.

Atomic means temp file in the same directory, fsync, ``os.replace``: a reader (or a worker
restarted by torchrun after a node died mid-write) sees either the previous checkpoint or the
new one, never a torn file. Only the latest is kept. torch is imported inside the functions.
With ``--checkpoint-every 0`` and ``--checkpoint-minutes 0`` a run writes no checkpoint at all,
not even at the end (``enabled``): a throughput measurement keeps no weights, and a restart of
such a run starts again from step 0.

Loading never runs code: ``torch.load(..., weights_only=True)`` accepts tensors, state dicts
and plain values only, so a tampered file on the shared volume cannot execute anything in the
pods (a pickle that names a callable is refused with ``UnpicklingError``). The non-tensor state
(step, epoch, offset, args, run_started_at, world_size, num_classes, ...) sits under ``"meta"``
inside the file, as plain values, and is also written beside it as ``latest.json`` (atomically,
right after the ``.pt``), readable without torch. The ``.pt`` is the authority: its tensors and
its meta come from one atomic replace; ``latest.json`` is its readable copy, and
``load_latest`` warns when the two disagree (a crash between the two replaces).

``Checkpointing`` is the trainer's side of this (``trainer.Run``'s ``resume`` and ``save``): every rank loads the
latest checkpoint and rank 0 makes the metrics files agree with it; rank 0 snapshots the state and hands it to
the ``BackgroundWriter``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from core.contract import strict_json
from core.contract.names import CHECKPOINT_DIR
from workloads.train.common.data import Position
from workloads.train.common.files import atomic_write
from workloads.train.common.metrics import JsonLines, metrics_dir, prune_after
from workloads.train.common.schedule import lr_at, set_lr
from workloads.train.pytorch.optim import seed_momentum

LATEST = "latest.pt"
LATEST_META = "latest.json"
META_KEYS = ("step", "epoch", "offset", "run_started_at", "world_size", "args", "num_classes", "lr", "saved_at",
             "samples_seen")


def checkpoint_dir(results_dir: str | Path) -> Path:
    return Path(results_dir) / CHECKPOINT_DIR


def latest_path(results_dir: str | Path) -> Path:
    return checkpoint_dir(results_dir) / LATEST


def enabled(every: int, minutes: float) -> bool:
    """Whether a run with these settings writes checkpoints at all (both 0: none, not even the final one)."""
    return every > 0 or minutes > 0


def is_due(step: int, every: int) -> bool:
    """Whether to checkpoint after global step ``step`` (``every`` = 0: never by step count)."""
    return every > 0 and step > 0 and step % every == 0


def meta_path(results_dir: str | Path) -> Path:
    return checkpoint_dir(results_dir) / LATEST_META


def split_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tensor part, plain-value meta): the meta keys move under ``"meta"``."""
    meta = {k: state[k] for k in META_KEYS if k in state}
    tensors = {k: v for k, v in state.items() if k not in meta}
    return tensors, meta


def save(results_dir: str | Path, state: dict[str, Any]) -> Path:
    """``latest.pt`` (tensors + ``"meta"``), then ``latest.json`` (the meta), each replaced atomically."""
    import torch

    tensors, meta = split_state(state)
    path = atomic_write(latest_path(results_dir), lambda f: torch.save({**tensors, "meta": meta}, f))
    text = strict_json.dumps({"checkpoint": LATEST, **meta}, indent=2, sort_keys=True).encode()
    atomic_write(meta_path(results_dir), lambda f: f.write(text))
    return path


def load_latest(results_dir: str | Path, map_location: Any = "cpu") -> dict[str, Any] | None:
    path = latest_path(results_dir)
    if not path.exists():
        return None
    state = load(path, map_location)
    try:
        import json

        side = json.loads(meta_path(results_dir).read_text())
        if side.get("step") != state.get("step"):
            print(f"[checkpoint] {meta_path(results_dir)} says step {side.get('step')} but {path} holds step "
                  f"{state.get('step')}: using {path}", flush=True)
    except (OSError, ValueError):
        pass
    return state


def load(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    """The checkpoint's tensors and meta (flattened back to the top level), loaded with
    ``weights_only=True``: a file that would run code on unpickling raises ``pickle.UnpicklingError``."""
    import torch

    # mmap: every rank of a language model reads the whole file; mapped, its tensors are paged in as each rank
    # copies out its shards, not held in each rank's memory at once
    state = torch.load(path, map_location=map_location, weights_only=True, mmap=True)
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a checkpoint (a {type(state).__name__}, not a dict)")
    meta = state.pop("meta", None)
    if isinstance(meta, dict):
        state.update(meta)
    return state


def to_cpu(obj: Any) -> Any:
    """A copy of a (nested) state dict with every tensor copied to CPU memory.

    This is the only part of a checkpoint the training loop waits for: afterwards the loop
    may change the parameters while the copy is written out in the background.
    """
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


class BackgroundWriter:
    """Writes checkpoints on one background thread, one at a time, in order.

    ``submit`` first waits for the previous write, so at most one snapshot is in memory and
    a later checkpoint never lands before an earlier one. Killed mid-write, the atomic
    replace leaves the previous checkpoint in place. A failed write raises from the next
    ``submit``/``wait``, in the training loop.
    """

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
        self._pending: tuple[dict[str, Any], Any] | None = None

    def submit(self, results_dir: str | Path, state: dict[str, Any], info: dict[str, Any]) -> dict[str, Any] | None:
        done = self.wait()
        self._pending = (info, self._pool.submit(_timed_save, results_dir, state))
        return done

    def wait(self) -> dict[str, Any] | None:
        """Block until the pending write is on disk; returns its info plus ``write_s``."""
        if self._pending is None:
            return None
        info, future = self._pending
        self._pending = None
        return {**info, "write_s": future.result()}

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _lower_priority() -> None:
    """Nice this thread (Linux schedules threads as tasks) so that writing yields to the training
    threads when the CPUs are busy (a CPU run; GPU nodes have cores to spare anyway)."""
    import threading

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


def _timed_save(results_dir: str | Path, state: dict[str, Any]) -> float:
    import time

    _lower_priority()
    t0 = time.perf_counter()
    save(results_dir, state)
    return round(time.perf_counter() - t0, 4)


# What a checkpoint's numbers depend on: a run resumed with any of these changed would splice two
# experiments into one results folder. Steps/epochs may grow (train longer), and paths, logging,
# workers and timeouts do not change the numbers.
RESUME_IDENTITY = ("workload", "batch_size", "precision", "dataset", "image_size", "width_per_group",
                   "channels_last", "seed", "lr", "model_size", "seq_len", "fp8_recipe")


def arguments_changed(saved: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """``key: saved -> current`` for every identity argument that differs ([] when none, or when the
    checkpoint recorded no arguments)."""
    if not saved:
        return []
    return [f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in RESUME_IDENTITY
            if k in saved and saved.get(k) != current.get(k)]


class Checkpointing:
    """``trainer.Run``'s checkpoints: ``resume`` on every (re)start, ``save`` at the loop's checkpoints and at its
    end. They read the run's ``args``, ``env``, ``rank``, ``world``, ``model``, ``optimizer``, ``scaler``,
    ``source`` and ``writer`` (``workloads.train.pytorch.run_setup``), and set ``lr`` and ``samples_seen``."""

    def resume(self, now: float) -> tuple[int, Position, float]:
        """Load the latest checkpoint (every rank) and make the metrics files agree with it."""
        import torch

        state = load_latest(self.args.results_dir) if self.args.harness else None
        changed = arguments_changed((state or {}).get("args"), asdict(self.args))
        if changed:
            raise RuntimeError(f"{latest_path(self.args.results_dir)} was written by a run with other arguments "
                               f"({'; '.join(changed)}); it is never resumed: use a new run id")
        step, pos, started = 0, Position(), now
        gb, size = self.args.batch_size * self.world, self.source.size
        self.samples_seen = 0
        if state is not None and self.lm is not None and self.distributed:  # every rank takes its shards
            self.lm.load_full_state(self.model, self.optimizer, state)
        elif state is not None:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        if state is not None:
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
        # The data's seed and slice are the data-parallel rank's: a tensor-parallel group trains the same batch
        if hasattr(self.source, "reseed"):
            self.source.reseed(self.args.seed * 7919 + self.data_rank * 104_729 + step)
        if hasattr(self.source, "start"):
            self.source.start(pos, global_batch=self.args.batch_size * self.world, rank=self.data_rank,
                              batch=self.data_batch, seed=self.args.seed)
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
        if not self.args.harness or not enabled(self.args.checkpoint_every, self.args.checkpoint_minutes):
            return
        t0 = time.perf_counter()
        sharded = self.lm is not None and self.distributed
        # A language model's full state is gathered by every rank together (rank 0 receives it, on its CPU), under
        # its own parameter names: one format whatever its layout (sharded or not, compiled or not)
        parts = self.lm.full_state(self.model, self.optimizer) if sharded else None
        if self.rank != 0:
            return
        parts = parts or to_cpu({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()})
        state = {**parts, "scaler": to_cpu(self.scaler.state_dict())}
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
