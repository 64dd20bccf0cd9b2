"""CIFAR-10 in torchvision's ``cifar-10-batches-py`` format: reading it, and writing a small stand-in.

The whole set (60k x 3x32x32 bytes) fits in memory, so a rank indexes it directly and
augments on the CPU (4-pixel padded random crop + flip) before moving the batch to the
device. ``write_standin`` makes a few hundred images in the same layout for CPU runs and tests;
each class has its own colour tint so a small model can learn something from them.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from workloads.train.common.data import Position, channel_stats, epoch_order, rank_indices

BATCH_DIR = "cifar-10-batches-py"
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def batches_dir(data_dir: str | Path) -> Path:
    """``<data-dir>/cifar10/cifar-10-batches-py`` (torchvision's download layout) or ``<data-dir>/cifar10``."""
    base = Path(data_dir) / "cifar10"
    return base / BATCH_DIR if (base / BATCH_DIR).is_dir() else base


def read_split(data_dir: str | Path, train: bool) -> tuple[Any, Any, list[str]]:
    """(uint8 tensor N x 3 x 32 x 32, int64 labels, class names)."""
    import torch

    x, y, classes = read_arrays(data_dir, train)
    return torch.from_numpy(x), torch.tensor(y, dtype=torch.int64), classes


def read_arrays(data_dir: str | Path, train: bool) -> tuple[Any, list[int], list[str]]:
    """(uint8 numpy array N x 3 x 32 x 32, labels, class names): numpy only, for every framework's trainer."""
    import numpy as np

    d = batches_dir(data_dir)
    names = sorted(d.glob("data_batch_*")) if train else [d / "test_batch"]
    if not names or not all(p.is_file() for p in names):
        raise FileNotFoundError(f"no CIFAR-10 {'data_batch_*' if train else 'test_batch'} files in {d}")
    xs, ys = [], []
    for p in names:
        with open(p, "rb") as f:
            entry = pickle.load(f, encoding="latin1")
        xs.append(np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        ys.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
    classes = list(CLASSES)
    meta = d / "batches.meta"
    if meta.is_file():
        with open(meta, "rb") as f:
            classes = list(pickle.load(f, encoding="latin1").get("label_names", classes))
    return np.concatenate(xs), [int(v) for v in ys], classes


def normalize(x_uint8: Any) -> Any:
    """uint8 NCHW (on its device) -> normalised float32; the mean and std made once per device
    (``workloads.train.common.data.channel_stats``), not per batch."""
    mean, std = channel_stats(MEAN, STD, 1, x_uint8.device)
    return (x_uint8.float() / 255.0 - mean) / std


def augment(x: Any, generator: Any, *, pin: bool = False) -> Any:
    """Padded random crop (4 px) and horizontal flip, per sample, on CPU uint8 tensors; ``pin``: into
    page-locked memory (a copy from there with ``non_blocking=True`` runs asynchronously; from pageable
    memory it does not)."""
    import torch
    import torch.nn.functional as F

    n = x.shape[0]
    padded = F.pad(x, (4, 4, 4, 4))
    shifts = torch.randint(0, 9, (n, 2), generator=generator).tolist()
    flips = torch.rand(n, generator=generator).lt(0.5).tolist()
    out = torch.empty(x.shape, dtype=x.dtype, pin_memory=pin)
    for i, ((dy, dx), flip) in enumerate(zip(shifts, flips)):
        crop = padded[i, :, dy:dy + 32, dx:dx + 32]
        out[i] = crop.flip(-1) if flip else crop
    return out


class CifarImages:
    def __init__(self, data_dir: str | Path, *, device: Any, channels_last: bool, seed: int, rank: int, batch: int):
        import torch

        self.x, self.y, self.classes = read_split(data_dir, train=True)
        self.size = len(self.y)
        self.device, self.seed, self.rank, self.per_rank = device, seed, rank, batch
        self.fmt = torch.channels_last if channels_last else torch.contiguous_format
        self.pin = torch.device(device).type == "cuda"  # page-locked host batches: only a GPU copies from them
        self.generator = torch.Generator()
        self._order: tuple[int, Any] = (-1, None)

    def reseed(self, value: int) -> None:
        self.generator.manual_seed(value)

    def host_batch(self, start: Position) -> tuple[Any, Any]:
        """This rank's augmented uint8 images and labels for the step at ``start``, in host memory: page-locked
        when the device is a GPU (from the caching host allocator, which reuses a block only once the copy
        that read it has run), so ``batch``'s ``non_blocking`` copies are asynchronous, no host sync."""
        import torch

        if self._order[0] != start.epoch:
            self._order = (start.epoch, epoch_order(self.size, start.epoch, self.seed))
        idx = rank_indices(self._order[1], start, self.rank, self.per_rank)
        x = augment(self.x[idx], self.generator, pin=self.pin)
        y = torch.empty(len(idx), dtype=self.y.dtype, pin_memory=self.pin)
        torch.index_select(self.y, 0, torch.tensor(idx, dtype=torch.long), out=y)
        return x, y

    def batch(self, start: Position) -> tuple[Any, Any]:
        x, y = self.host_batch(start)
        x = x.to(self.device, non_blocking=True)
        return normalize(x).contiguous(memory_format=self.fmt), y.to(self.device, non_blocking=True)


def accuracy(model: Any, data_dir: str | Path, *, device: Any, autocast: Any, batch: int = 500) -> dict[str, Any]:
    """Overall and per-class test accuracy of ``model`` (left in eval mode for the caller to reset)."""
    import torch

    x, y, classes = read_split(data_dir, train=False)
    model.eval()
    correct = torch.zeros(len(classes), dtype=torch.int64)
    total = torch.zeros(len(classes), dtype=torch.int64)
    with torch.no_grad(), autocast():
        for lo in range(0, len(y), batch):
            pred = model(normalize(x[lo:lo + batch].to(device))).argmax(1).cpu()
            yy = y[lo:lo + batch]
            total += torch.bincount(yy, minlength=len(classes))
            correct += torch.bincount(yy[pred == yy], minlength=len(classes))
    per_class = {c: (round(int(k) / int(n), 4) if n else None) for c, k, n in zip(classes, correct, total)}
    return {"accuracy": round(int(correct.sum()) / max(1, int(total.sum())), 4), "per_class": per_class,
            "samples": int(total.sum())}


def write_standin(data_dir: str | Path, *, train: int = 500, test: int = 200, seed: int = 0) -> Path:
    """Write ``<data-dir>/cifar10/cifar-10-batches-py`` with ``train``/``test`` tinted-noise images."""
    import numpy as np

    rng = np.random.default_rng(seed)
    tints = rng.integers(40, 216, size=(len(CLASSES), 3))
    d = Path(data_dir) / "cifar10" / BATCH_DIR
    d.mkdir(parents=True, exist_ok=True)

    def images(n: int) -> tuple[Any, list[int]]:
        labels = rng.integers(0, len(CLASSES), size=n)
        noise = rng.normal(0, 40, size=(n, 3, 32, 32))
        x = np.clip(tints[labels][:, :, None, None] + noise, 0, 255).astype(np.uint8)
        return x.reshape(n, 3072), [int(v) for v in labels]

    per_file = -(-train // 5)
    for i in range(5):
        n = max(0, min(per_file, train - i * per_file))
        x, labels = images(n)
        _dump(d / f"data_batch_{i + 1}", {"batch_label": f"training batch {i + 1} of 5", "labels": labels,
                                            "data": x, "filenames": [f"standin_{i}_{j}.png" for j in range(n)]})
    x, labels = images(test)
    _dump(d / "test_batch", {"batch_label": "testing batch 1 of 1", "labels": labels, "data": x,
                             "filenames": [f"standin_test_{j}.png" for j in range(test)]})
    _dump(d / "batches.meta", {"label_names": list(CLASSES), "num_cases_per_batch": per_file, "num_vis": 3072})
    return d


def _dump(path: Path, obj: dict[str, Any]) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)
