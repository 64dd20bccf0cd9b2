"""Token batches for a language model: random tokens, or windows of pre-tokenized shards, addressed by position.

Each source hands the trainer ``(inputs, targets)``, int64 tensors of shape [batch, seq_len] on the device, the
targets being the inputs shifted by one token; with the interface of the image sources
(``workloads.train.common.data``): ``size`` (samples per epoch, None for synthetic), ``batch(position)``,
``start(pos, *, global_batch, rank, batch, seed)`` and ``close()``.

A sample of ``TokenShards`` is a window of seq_len + 1 tokens of one shard; window k of a shard starts at token
k x seq_len, so consecutive windows share one token and every token but a shard's first is a target once. The
epoch's order is ``data.epoch_order`` over all windows; a global step takes ``global_batch`` of them and a
rank its slice (``data.rank_indices``), so a run resumed with another number of data-parallel ranks and the
same global batch reads the same windows.

Tensor parallelism: ranks of one tensor-parallel group must see the same tokens, so a source is addressed by
the data-parallel rank and the per-data-parallel-rank batch that the trainer passes (``dp_rank``, and
``start``'s ``rank`` and ``batch``), never by the global rank; and no source here has ``reseed``: a batch
depends on (seed, position, data-parallel rank) alone.

The shards and the manifest are in ``core.contract.token_shards``' format; the manifest is read bounded in size,
never blocking on a FIFO, and a shard is read through ``numpy.memmap``, never loaded whole. numpy and torch are
imported inside the functions.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from core.contract.token_shards import MANIFEST_FILE, MAX_MANIFEST_BYTES, TokenLayout, token_layout
from workloads.train.common.data import Position, epoch_order, rank_indices


def token_root(data_dir: str | Path, dataset: str) -> Path:
    """``<data-dir>/<dataset>``: where a pre-tokenized dataset's manifest and split folders are."""
    return Path(data_dir) / dataset


def _to_device(rows: Any, device: Any) -> tuple[Any, Any]:
    """[batch, seq_len + 1] token rows -> (inputs, targets) int64 on ``device`` (one copy; pinned for a GPU)."""
    import numpy as np
    import torch

    cuda = torch.device(device).type == "cuda"
    t = torch.from_numpy(rows.astype(np.int64))
    if cuda:
        t = t.pin_memory()
    t = t.to(device, non_blocking=cuda)
    return t[:, :-1].contiguous(), t[:, 1:].contiguous()


class SyntheticTokens:
    """One random batch of token ids, made once and kept on the device, reused every step: the synthetic input
    of NVIDIA's LLM recipes. Kept rather than drawn anew each step: a step's FLOPs do not depend on the ids, and
    a kept batch costs no kernel and no copy per step, so the throughput is the model's alone (the loss falls
    as the model learns the batch by heart: it means nothing here). ``seed``: the same on every rank of a
    tensor-parallel group (the data-parallel rank added, not the global rank)."""
    size = None

    def __init__(self, *, batch: int, seq_len: int, vocab_size: int, device: Any, seed: int):
        import torch

        if batch < 1 or seq_len < 1 or vocab_size < 2:
            raise ValueError(f"synthetic tokens: batch {batch}, seq_len {seq_len}, vocab_size {vocab_size}; "
                             "batch and seq_len must be >= 1 and vocab_size >= 2, e.g. 8, 128, 257")
        g = torch.Generator().manual_seed(seed)
        rows = torch.randint(0, vocab_size, (batch, seq_len + 1), generator=g, dtype=torch.int64)
        self.x, self.y = rows[:, :-1].contiguous().to(device), rows[:, 1:].contiguous().to(device)

    def batch(self, start: Position) -> tuple[Any, Any]:
        return self.x, self.y

    def close(self) -> None:
        """Nothing to stop."""


def read_manifest(root: str | Path) -> tuple[Path, dict]:
    """(its path, the parsed ``manifest.json`` of ``root``); ValueError naming the file when it is not a regular
    file, is larger than ``MAX_MANIFEST_BYTES`` or is not JSON. Never blocks on a FIFO (checked by ``stat``,
    opened non-blocking) and never follows a symbolic link at the manifest itself."""
    path = Path(root) / MANIFEST_FILE
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as e:
        raise ValueError(f"{path}: cannot read the dataset's manifest ({e.strerror}); prepare the dataset there "
                         "first (`eksbench data prepare NAME --to DIR`)") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: not a regular file; a dataset's manifest must be one")
    if st.st_size > MAX_MANIFEST_BYTES:
        raise ValueError(f"{path}: {st.st_size} bytes; a manifest may hold at most {MAX_MANIFEST_BYTES} bytes")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path}: not a regular file; a dataset's manifest must be one")
        raw = f.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ValueError(f"{path}: more than {MAX_MANIFEST_BYTES} bytes; a manifest may hold at most that")
    try:
        return path, json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{path}: not JSON in UTF-8 ({str(e)[:120]})") from None


def load_layout(root: str | Path, *, vocab_size: int | None, tokenizer: str | None = None) -> TokenLayout:
    """The checked token layout of the dataset at ``root``; ValueError when its tokenizer's ids do not fit the
    model's vocabulary (``vocab_size``; None: not checked) or it was made by another ``tokenizer`` than asked."""
    path, manifest = read_manifest(root)
    layout = token_layout(manifest, str(path))
    if tokenizer is not None and layout.tokenizer != tokenizer:
        raise ValueError(f"{path}: tokenizer {layout.tokenizer!r}; the model expects {tokenizer!r}")
    if vocab_size is not None and layout.vocab_size > vocab_size:
        raise ValueError(f"{path}: tokenizer {layout.tokenizer!r} has vocab_size {layout.vocab_size}, more ids "
                         f"than the model's vocabulary ({vocab_size}); use a model with vocab_size >= "
                         f"{layout.vocab_size}, or a dataset made for this model's tokenizer")
    return layout


def _open_shard(root: Path, rel: str, tokens: int, dtype: str, itemsize: int) -> Any:
    """A read-only memmap of one shard, after checking it stays inside ``root`` (no symbolic link out), is a
    regular file and holds ``tokens`` x ``itemsize`` bytes."""
    import numpy as np

    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, rel))
    if os.path.commonpath([real_root, real]) != real_root or real == real_root:
        raise ValueError(f"{root / rel}: leads outside the dataset's folder {root} (a symbolic link); refused")
    try:
        st = os.stat(real)
    except OSError as e:
        raise ValueError(f"{root / rel}: cannot read the shard ({e.strerror}); stage the dataset again") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{root / rel}: not a regular file; a shard must be one")
    if st.st_size != tokens * itemsize:
        raise ValueError(f"{root / rel}: {st.st_size} bytes, but the manifest says {tokens} tokens of {dtype} "
                         f"({tokens * itemsize} bytes); stage the dataset again")
    if tokens == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(real, dtype=np.dtype(dtype).newbyteorder("<"), mode="r", shape=(tokens,))


class Windows:
    """The windows of seq_len + 1 tokens of one split, indexed 0..size-1 across its shards in manifest order."""

    def __init__(self, root: str | Path, split: str, *, seq_len: int, vocab_size: int | None,
                 tokenizer: str | None = None):
        import numpy as np

        if seq_len < 1:
            raise ValueError(f"seq_len {seq_len}: must be >= 1, e.g. 128")
        self.root, self.split, self.seq_len = Path(root), split, seq_len
        self.layout = load_layout(root, vocab_size=vocab_size, tokenizer=tokenizer)
        shards = self.layout.shards(split)
        self.paths = [s.path for s in shards]
        self.maps = [_open_shard(self.root, s.path, s.tokens, self.layout.dtype, self.layout.itemsize)
                     for s in shards]
        counts = np.array([max(0, (s.tokens - 1) // seq_len) for s in shards], dtype=np.int64)
        self.ends = np.cumsum(counts)  # window index where each shard's windows end
        self.size = int(self.ends[-1]) if len(self.ends) else 0
        if self.size == 0:
            raise ValueError(f"{self.root / MANIFEST_FILE}: split {split!r} has no whole window of seq_len + 1 = "
                             f"{seq_len + 1} tokens ({sum(s.tokens for s in shards)} tokens in {len(shards)} "
                             "shards); use a shorter seq_len or a larger dataset")

    def rows(self, indices: list[int]) -> Any:
        """The windows at ``indices`` as one [len, seq_len + 1] array (their dtype), read from the memmaps;
        ValueError naming the shard when an id is outside the vocabulary."""
        import numpy as np

        shard_of = np.searchsorted(self.ends, indices, side="right")
        out = np.empty((len(indices), self.seq_len + 1), dtype=self.layout.dtype)
        for row, (i, s) in enumerate(zip(indices, shard_of.tolist())):
            first = int(i) - (int(self.ends[s - 1]) if s else 0)
            out[row] = self.maps[s][first * self.seq_len:first * self.seq_len + self.seq_len + 1]
        if out.size and int(out.max()) >= self.layout.vocab_size:
            bad = int(shard_of[int(np.argmax(out.max(axis=1)))])
            raise ValueError(f"{self.root / self.paths[bad]}: holds token id {int(out.max())}, outside the "
                             f"tokenizer's vocabulary ({self.layout.vocab_size}); prepare the dataset again")
        return out


class TokenShards:
    """``<root>/<split>/shard_*.bin`` windows in a seeded order per epoch; a data-parallel rank reads its slice
    of each global step. ``vocab_size``: the model's (a dataset whose ids do not fit it is refused)."""

    def __init__(self, root: str | Path, split: str = "train", *, batch: int, seq_len: int, device: Any, seed: int,
                 vocab_size: int, dp_rank: int = 0, tokenizer: str | None = None):
        self.windows = Windows(root, split, seq_len=seq_len, vocab_size=vocab_size, tokenizer=tokenizer)
        self.size = self.windows.size
        self.device, self.seed = device, seed
        self.rank, self.per_rank = dp_rank, batch
        self._order: tuple[int, Any] = (-1, None)
        self._check_slice(batch * (dp_rank + 1), dp_rank, batch)

    def _check_slice(self, global_batch: int, rank: int, batch: int) -> None:
        if batch < 1 or rank < 0 or (rank + 1) * batch > global_batch:
            raise ValueError(f"data-parallel rank {rank} with batch {batch} does not fit a global batch of "
                             f"{global_batch} windows: rank x batch + batch must be <= the global batch")

    def start(self, pos: Position, *, global_batch: int, rank: int, batch: int, seed: int) -> None:
        """Take the data-parallel ``rank`` and its ``batch`` (of ``global_batch``) and the order's ``seed`` as
        given; ``pos`` is not needed: ``batch`` is handed each step's position."""
        self._check_slice(global_batch, rank, batch)
        self.rank, self.per_rank = rank, batch
        if seed != self.seed:
            self.seed, self._order = seed, (-1, None)

    def indices(self, start: Position) -> list[int]:
        """The windows this rank reads at the step starting at ``start``."""
        if self._order[0] != start.epoch:
            self._order = (start.epoch, epoch_order(self.size, start.epoch, self.seed))
        return rank_indices(self._order[1], start, self.rank, self.per_rank)

    def batch(self, start: Position) -> tuple[Any, Any]:
        return _to_device(self.windows.rows(self.indices(start)), self.device)

    def close(self) -> None:
        """Drop the order; the memmaps close with the object."""
        self._order = (-1, None)


def validation_batches(root: str | Path, *, seq_len: int, batch: int, max_batches: int, device: Any,
                       vocab_size: int | None = None, split: str = "val") -> list[tuple[Any, Any]]:
    """A fixed list of held-out batches from ``split``: at most ``max_batches`` of ``batch`` windows, spread
    evenly over the split (the same on every rank and every call), as (inputs, targets) on ``device``."""
    import numpy as np

    if batch < 1 or max_batches < 1:
        raise ValueError(f"validation: batch {batch}, max_batches {max_batches}; both must be >= 1, e.g. 8 and 4")
    windows = Windows(root, split, seq_len=seq_len, vocab_size=vocab_size)
    n = min(max_batches, windows.size // batch)
    if n == 0:
        raise ValueError(f"{windows.root / MANIFEST_FILE}: split {split!r} has {windows.size} windows of "
                         f"{seq_len + 1} tokens, fewer than one batch of {batch}; use a smaller batch or seq_len")
    picks = np.linspace(0, windows.size, n * batch, endpoint=False).astype(np.int64).tolist()
    return [_to_device(windows.rows(picks[k * batch:(k + 1) * batch]), device) for k in range(n)]
