"""Where each rank's batches come from, addressed by position so a resumed run continues in place.

The position of a run in its data is ``(epoch, offset)``: samples of the epoch's shuffled
order already consumed by all ranks together. Each global step takes ``batch x world`` samples
from that order (rank r takes its slice), so a group that restarts with another world size
resumes exactly where the checkpoint left off. Synthetic data has no epochs (one fixed batch
kept on the device, the usual synthetic benchmark).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator


@dataclass(frozen=True)
class Position:
    epoch: int = 0
    offset: int = 0


def next_slice(size: int, pos: Position, global_batch: int) -> tuple[Position, Position]:
    """(where this step reads from, the position after it); drops an epoch's incomplete tail."""
    if global_batch > size:
        raise ValueError(f"global batch {global_batch} is larger than the dataset ({size} samples)")
    start = pos if pos.offset + global_batch <= size else Position(pos.epoch + 1, 0)
    return start, Position(start.epoch, start.offset + global_batch)


def epoch_ends(size: int, after: Position, global_batch: int) -> bool:
    return after.offset + global_batch > size


def epoch_order(size: int, epoch: int, seed: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(size, generator=g)


def rank_indices(order: Any, start: Position, rank: int, batch: int) -> list[int]:
    lo = start.offset + rank * batch
    return order[lo:lo + batch].tolist()


class SyntheticImages:
    """One random batch of ImageNet-shaped tensors, kept on the device and reused every step."""
    size = None

    def __init__(self, *, batch: int, image_size: int, num_classes: int, device: Any, channels_last: bool, seed: int):
        import torch

        g = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, 3, image_size, image_size, generator=g)
        y = torch.randint(0, num_classes, (batch,), generator=g)
        self.x = x.to(device, memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        self.y = y.to(device)

    def batch(self, start: Position) -> tuple[Any, Any]:
        return self.x, self.y


class _RankBatches:
    """Index lists for one rank from a position onwards, for a DataLoader's ``batch_sampler``."""

    def __init__(self, size: int, start: Position, global_batch: int, rank: int, batch: int, seed: int):
        self.size, self.pos, self.gb, self.rank, self.batch, self.seed = size, start, global_batch, rank, batch, seed

    def __iter__(self) -> Iterator[list[int]]:
        pos, order, order_epoch = self.pos, None, -1
        while True:
            start, pos = next_slice(self.size, pos, self.gb)
            if start.epoch != order_epoch:
                order, order_epoch = epoch_order(self.size, start.epoch, self.seed), start.epoch
            yield rank_indices(order, start, self.rank, self.batch)


class ImageFolderImages:
    """``<data-dir>/<dataset>/train/<class>/*.JPEG`` with RandomResizedCrop + flip, decoded by workers."""

    def __init__(self, root: Path, *, image_size: int, device: Any, channels_last: bool, workers: int):
        import torchvision
        from torchvision import transforms as T

        tf = T.Compose([T.RandomResizedCrop(image_size), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
        self.dataset = torchvision.datasets.ImageFolder(str(root), transform=tf)
        self.size = len(self.dataset)
        self.num_classes = len(self.dataset.classes)
        self.device, self.channels_last, self.workers = device, channels_last, workers
        self._it: Iterator[Any] | None = None

    def start(self, pos: Position, *, global_batch: int, rank: int, batch: int, seed: int) -> None:
        from torch.utils.data import DataLoader

        loader = DataLoader(self.dataset, batch_sampler=_RankBatches(self.size, pos, global_batch, rank, batch, seed),
                            num_workers=self.workers, pin_memory=self.device.type == "cuda",
                            persistent_workers=self.workers > 0)
        self._it = iter(loader)

    def batch(self, start: Position) -> tuple[Any, Any]:
        import torch

        x, y = next(self._it)
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        return x.to(self.device, non_blocking=True, memory_format=fmt), y.to(self.device, non_blocking=True)


def image_folder_root(data_dir: str | Path, dataset: str) -> Path:
    return Path(data_dir) / dataset / "train"
