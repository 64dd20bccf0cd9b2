"""Where each rank's batches come from, addressed by position so a resumed run continues in place.

The position of a run in its data is ``(epoch, offset)``: samples of the epoch's shuffled
order already consumed by all ranks together. Each global step takes ``batch x world`` samples
from that order (rank r takes its slice), so a group that restarts with another world size
resumes exactly where the checkpoint left off. Synthetic data has no epochs (one fixed batch
kept on the device, the usual synthetic benchmark).
"""

from __future__ import annotations

import functools
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


def nth_slice(size: int, pos: Position, global_batch: int, n: int) -> Position:
    """Where the ``n``-th step after ``pos`` reads from (``n`` = 0: the next one): ``next_slice`` applied ``n + 1``
    times, in constant time, for a reader that is handed a step's number rather than walking the steps."""
    if global_batch > size:
        raise ValueError(f"global batch {global_batch} is larger than the dataset ({size} samples)")
    left = (size - pos.offset) // global_batch  # steps still in pos's epoch
    if n < left:
        return Position(pos.epoch, pos.offset + n * global_batch)
    per_epoch = size // global_batch
    n -= left
    return Position(pos.epoch + 1 + n // per_epoch, (n % per_epoch) * global_batch)


def next_step(size: int | None, pos: Position, global_batch: int, step: int, args: Any) -> tuple[Position, Position] | None:
    """(where the next step reads from, the position after it), or None when the run is done: its
    ``args.epochs`` (an epoch run) or its ``args.steps`` (a step run). Synthetic data (``size``
    None) has no positions. Every framework's training loop asks this."""
    if size is not None:
        start, after = next_slice(size, pos, global_batch)
        if args.by_epochs and start.epoch >= args.epochs:
            return None
    else:
        start, after = pos, pos
    if not args.by_epochs and step >= args.steps:
        return None
    return start, after


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


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@functools.lru_cache(maxsize=32)
def channel_stats(mean: tuple[float, ...], std: tuple[float, ...], scale: float, device: Any) -> tuple[Any, Any]:
    """(mean x scale, std x scale) as 1 x C x 1 x 1 float32 tensors on ``device``, made once per device and
    reused by every batch after: made per batch, each was a copy from pageable host memory, which
    blocks the host until the GPU has run everything queued before it (a sync per batch)."""
    import torch

    def make(values: tuple[float, ...]) -> Any:
        t = torch.tensor(values, device=device).view(1, len(values), 1, 1)
        return t * scale if scale != 1 else t  # on the device, as before: the same float32 products
    stats = make(mean), make(std)
    if torch.device(device).type == "cuda":  # made on one stream, read from any (a prefetcher's side stream): once
        torch.cuda.current_stream(device).synchronize()
    return stats


def normalize_on_device(x_uint8: Any, *, channels_last: bool) -> Any:
    """uint8 NCHW (already on the device) -> normalised float32, in the requested memory format."""
    import torch

    mean, std = channel_stats(IMAGENET_MEAN, IMAGENET_STD, 255, x_uint8.device)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return ((x_uint8.float() - mean) / std).contiguous(memory_format=fmt)


class DevicePrefetcher:
    """Moves the next batch to the GPU on a side stream while the current one trains.

    ``next()`` hands out a batch whose copy (and normalisation) was queued one step earlier;
    the compute stream waits for it, and ``record_stream`` keeps the caching allocator from
    reusing its memory too early (the pattern of NVIDIA's DeepLearningExamples loaders).
    On CPU it only converts. ``wait_s`` adds up the time spent blocked on the loader.
    """

    def __init__(self, it: Iterator[Any], *, device: Any, convert: Any):
        import torch

        self.it, self.device, self.convert = it, device, convert
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._next: Any = None
        self._preload()

    def _preload(self) -> None:
        import torch

        host = next(self.it)
        if self.stream is None:
            self._next = self.convert(host)
            return
        with torch.cuda.stream(self.stream):
            self._next = self.convert(host)

    def next(self) -> Any:
        import torch

        if self.stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
            for t in _tensors(self._next):
                t.record_stream(torch.cuda.current_stream(self.device))
        out = self._next
        self._preload()
        return out


def _tensors(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    return []


class _JpegBytes:
    """ImageFolder samples as raw file bytes, for decoding on the GPU. Plain ``bytes`` (pickled
    through the worker pipe, ~0.1 MB an image) rather than one shared-memory tensor per image,
    which costs a file descriptor each."""

    def __init__(self, samples: list[tuple[str, int]]):
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[bytes, int]:
        path, label = self.samples[i]
        return Path(path).read_bytes(), label


def _bytes_collate(batch: list[tuple[bytes, int]]) -> tuple[list[bytes], Any]:
    import torch

    return [b[0] for b in batch], torch.tensor([b[1] for b in batch])


def decode_crop(data: list[Any], *, image_size: int, device: Any, generator: Any) -> Any:
    """JPEG bytes -> uint8 N x 3 x S x S on ``device``: ``torchvision.io.decode_jpeg(device=...)``
    (nvJPEG on CUDA, batched), then RandomResizedCrop + horizontal flip per image on the device."""
    import torch
    import torchvision
    from torchvision.transforms import RandomResizedCrop
    from torchvision.transforms import functional as F

    data = [torch.frombuffer(bytearray(b), dtype=torch.uint8) if isinstance(b, (bytes, bytearray)) else b
            for b in data]
    if torch.device(device).type == "cuda":
        # torchvision's batched GPU decode (csrc/io/image/cuda/decode_jpegs_cuda.cpp, batched since
        # pytorch/vision#8496) allocates its outputs on the caller's stream, then decodes on a stream of torch's pool
        # that does not wait for the caller's. The caching allocator hands out a block freed on the caller's stream
        # at once, trusting that stream's order: kernels still queued there (the previous batch's crop and
        # normalisation, on the prefetcher's side stream) may read the block nvJPEG is already writing
        # (pytorch/vision#9606). Those kernels finish first; the decode blocks the host itself anyway.
        torch.cuda.current_stream(device).synchronize()
    images = torchvision.io.decode_jpeg(data, mode=torchvision.io.ImageReadMode.RGB, device=device)
    out = []
    for im in images:
        i, j, h, w = RandomResizedCrop.get_params(im, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
        im = F.resized_crop(im, i, j, h, w, [image_size, image_size], antialias=True)
        if torch.rand(1, generator=generator).item() < 0.5:
            im = im.flip(-1)
        out.append(im)
    return torch.stack(out)


class ImageFolderImages:
    """``<data-dir>/<dataset>/train/<class>/*.JPEG``: RandomResizedCrop + flip.

    Workers (``workers``; the cluster derives it from the node's vCPUs per GPU) decode with
    Pillow and hand out uint8 batches (4x less to copy than float32; normalised on the device),
    pinned, prefetched to the GPU on a side stream. ``gpu_decode``: workers only read the file
    bytes and the GPU decodes (nvJPEG via ``torchvision.io.decode_jpeg``) and crops; on a CPU
    run the same path decodes on the CPU.
    """

    def __init__(self, root: Path, *, image_size: int, device: Any, channels_last: bool, workers: int,
                 gpu_decode: bool = False):
        import torchvision
        from torchvision import transforms as T

        tf = T.Compose([T.RandomResizedCrop(image_size), T.RandomHorizontalFlip(), T.PILToTensor()])
        self.folder = torchvision.datasets.ImageFolder(str(root), transform=None if gpu_decode else tf)
        self.dataset = _JpegBytes(self.folder.samples) if gpu_decode else self.folder
        self.size = len(self.folder)
        self.num_classes = len(self.folder.classes)
        self.image_size, self.gpu_decode = image_size, gpu_decode
        self.device, self.channels_last, self.workers = device, channels_last, workers
        self._pre: DevicePrefetcher | None = None
        self._generator: Any = None

    def reseed(self, value: int) -> None:
        import torch

        self._generator = torch.Generator().manual_seed(value)

    def _convert(self, host: tuple[Any, Any]) -> tuple[Any, Any]:
        x, y = host
        if self.gpu_decode:
            x = decode_crop(x, image_size=self.image_size, device=self.device, generator=self._generator)
        else:
            x = x.to(self.device, non_blocking=True)
        return normalize_on_device(x, channels_last=self.channels_last), y.to(self.device, non_blocking=True)

    def start(self, pos: Position, *, global_batch: int, rank: int, batch: int, seed: int) -> None:
        from torch.utils.data import DataLoader

        if self._generator is None:
            self.reseed(seed)
        extra = {"prefetch_factor": 4, "persistent_workers": True} if self.workers > 0 else {}
        loader = DataLoader(self.dataset, batch_sampler=_RankBatches(self.size, pos, global_batch, rank, batch, seed),
                            num_workers=self.workers, pin_memory=self.device.type == "cuda",
                            collate_fn=_bytes_collate if self.gpu_decode else None, **extra)
        self._pre = DevicePrefetcher(iter(loader), device=self.device, convert=self._convert)

    def batch(self, start: Position) -> tuple[Any, Any]:
        return self._pre.next()

    def close(self) -> None:
        """Stop the loader's workers now (dropping the iterator shuts them down)."""
        self._pre = None


def image_folder_root(data_dir: str | Path, dataset: str) -> Path:
    return Path(data_dir) / dataset / "train"
