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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.contract import strict_json
from core.contract.names import CHECKPOINT_DIR
from workloads.train.common.files import atomic_write

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

    state = torch.load(path, map_location=map_location, weights_only=True)
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
                   "channels_last", "seed", "lr")


def arguments_changed(saved: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """``key: saved -> current`` for every identity argument that differs ([] when none, or when the
    checkpoint recorded no arguments)."""
    if not saved:
        return []
    return [f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in RESUME_IDENTITY
            if k in saved and saved.get(k) != current.get(k)]
