"""The trainer's own ImageFolder input paths (``workloads.train.common.data.ImageFolderImages`` and
``workloads.train.common.dali_input.DaliImages``) against bare loops, side by side in one run, on the GPU when there
is one (else the CPU).

``python -m bench.benchmarks.input_pipeline [--images 512 --resolution 256 433 --workers 0 1 2 --batch 32
--batches 12 --paths pillow nvjpeg dali] [--json FILE | --save]``; ``--smoke`` runs tiny sizes (a test calls it) to
prove the script, not to measure. ``--save`` writes the JSON to
``bench/benchmarks/results/input_pipeline-<device>-<date>.json``.

For each resolution and worker count it measures images/s out of:

- ``pillow``: the trainer's path: Pillow decodes and crops in the workers, uint8 batches (pinned on a GPU),
  copied to the device on a side stream, normalised there to float32 channels_last;
- ``bare_pillow``: a bare torchvision loop of the same decode and crop: ``ImageFolder`` + ``DataLoader`` (same
  workers, pinned on a GPU) and the copy to the device, nothing else: the ceiling of the trainer's Pillow path;
- ``nvjpeg``: the trainer's ``input_path: nvjpeg``: the workers read JPEG bytes, the training process decodes
  them (``torchvision.io.decode_jpeg``: nvJPEG on a GPU, libjpeg-turbo on a CPU), crops and flips per image and
  normalises;
- ``dali``: the trainer's ``input_path: dali`` (the GPU default): reader processes read the files, DALI decodes
  each crop (on the GPU: nvJPEG, its hardware decoder where it has one; else CPU threads), resizes, flips and
  normalises; skipped, and said so, where DALI does not import;
- ``bare_decode``: one batched ``decode_jpeg(list, device=...)`` per batch on bytes already in memory, nothing
  else (12,856 img/s measured on an H100, 2026-11): the ceiling of the decode itself.

The first batch (worker start-up) is not timed; on a GPU the clock stops after a device sync. On a CPU this
prices the host side only and says nothing about nvJPEG.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from bench.benchmarks.gpu_resnet50 import RESULTS_DIR, result_name, save_json
from datasets.synthetic import SyntheticSpec, generate


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


PATHS = ("pillow", "nvjpeg", "dali")  # the trainer's input paths (TrainArgs.input_path)


def measure(root: Path, *, workers: int, path: str, batch: int, batches: int, device: Any = None,
            image_size: int = 224) -> float:
    """images/s out of the trainer's data source for input path ``path`` (its ``batch()``)."""
    import torch

    from workloads.train.common.data import Position
    from workloads.train.pytorch.registry import image_folder_source

    device = device or torch.device("cpu")
    src = image_folder_source(root, path, image_size=image_size, device=device, channels_last=True, workers=workers)
    src.start(Position(), global_batch=batch, rank=0, batch=batch, seed=0)
    src.batch(Position())  # worker start-up and the first batch: not timed
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(batches):
        x, _ = src.batch(Position())
    _sync(device)
    dt = time.perf_counter() - t0
    src.close()
    assert x.dtype == torch.float32 and x.shape == (batch, 3, image_size, image_size)
    return batch * batches / dt


def bare_pillow(root: Path, *, workers: int, batch: int, batches: int, device: Any, image_size: int = 224) -> float:
    """images/s of a plain torchvision loader with the same decode and crop, copied to the device."""
    import torch
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision import transforms as T

    tf = T.Compose([T.RandomResizedCrop(image_size), T.RandomHorizontalFlip(), T.PILToTensor()])
    folder = torchvision.datasets.ImageFolder(str(root), transform=tf)
    loader = DataLoader(folder, batch_size=batch, shuffle=True, drop_last=True, num_workers=workers,
                        pin_memory=device.type == "cuda", generator=torch.Generator().manual_seed(0),
                        **({"persistent_workers": True, "prefetch_factor": 4} if workers else {}))
    it = _forever(loader)
    next(it)[0].to(device)  # worker start-up: not timed
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(batches):
        x, _ = next(it)
        x = x.to(device, non_blocking=True)
    _sync(device)
    return batch * batches / (time.perf_counter() - t0)


def bare_decode(root: Path, *, batch: int, batches: int, device: Any) -> float:
    """images/s of batched ``decode_jpeg`` alone, on file bytes already in memory."""
    import torch
    import torchvision

    files = sorted(root.rglob("*.JPEG"))
    data = [torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.uint8) for f in files[:batch * (batches + 1)]]
    data = (data * (batch * (batches + 1) // max(1, len(data)) + 1))[:batch * (batches + 1)]

    def decode(k: int) -> Any:
        return torchvision.io.decode_jpeg(data[k * batch:(k + 1) * batch], mode=torchvision.io.ImageReadMode.RGB,
                                          device=device)
    decode(0)  # nvJPEG's start-up: not timed
    _sync(device)
    t0 = time.perf_counter()
    for k in range(1, batches + 1):
        decode(k)
    _sync(device)
    return batch * batches / (time.perf_counter() - t0)


def _forever(loader: Any) -> Any:
    while True:
        yield from loader


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else \
        f"cpu {platform.processor() or platform.machine()}"
    skipped = skipped_paths(args.paths)
    paths = [p for p in args.paths if p not in skipped]
    print(f"# {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"torch {torch.__version__}, device {device}, {args.threads} torch thread(s) in the training process")
    rows: list[dict[str, Any]] = []
    started = datetime.now(timezone.utc)

    def write() -> None:
        write_results(args, started=started, device=device, device_name=device_name, skipped=skipped, rows=rows)
    with tempfile.TemporaryDirectory(prefix="eksbench-pipeline-") as tmp:
        for resolution in args.resolution:
            row = measure_resolution(Path(tmp), resolution, args, paths=paths, device=device, rows=rows, write=write)
            print(json.dumps(row), flush=True)
    if args.save:
        print(f"saved {RESULTS_DIR / result_name(device_name, started, 'input_pipeline')}")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with ``--smoke``'s tiny sizes put in."""
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.input_pipeline", description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--resolution", type=int, nargs="+", default=[256, 433])
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches", type=int, default=12)
    p.add_argument("--image-size", type=int, default=224, help="the crop the trainer trains at")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the training process")
    p.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS), help="the trainer's input paths to time")
    p.add_argument("--smoke", action="store_true", help="tiny sizes (proves the script runs)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--save", action="store_true",
                   help="also write them to bench/benchmarks/results/input_pipeline-<device>-<date>.json")
    args = p.parse_args(argv)
    if args.smoke:
        args.images, args.resolution, args.workers = 16, [48], [0]
        args.batch, args.batches, args.image_size = 4, 2, 32
    return args


def skipped_paths(paths: list[str]) -> dict[str, str]:
    """{input path: why it cannot run here}: DALI where it does not import, said as it is found."""
    skipped = {}
    if "dali" in paths:
        from workloads.train.common.dali_input import available

        why = available()
        if why:
            skipped["dali"] = why
            print(f"# dali skipped: {why}")
    return skipped


def write_results(args: argparse.Namespace, *, started: datetime, device: Any, device_name: str,
                  skipped: dict[str, str], rows: list[dict[str, Any]]) -> None:
    """The results so far as JSON, to ``--json`` and (``--save``) the results folder."""
    text = json.dumps({"benchmark": "input_pipeline", "smoke": args.smoke,
                       "date": started.strftime("%Y-%m-%d %H:%M UTC"), "device": str(device),
                       "device_name": device_name, "skipped": skipped,
                       "config": {k: v for k, v in vars(args).items() if k not in ("json", "save")},
                       "results": rows}, indent=2)
    save_json(text, args.json, result_name(device_name, started, "input_pipeline") if args.save else None)


def measure_resolution(tmp: Path, resolution: int, args: argparse.Namespace, *, paths: list[str], device: Any,
                       rows: list[dict[str, Any]], write: Callable[[], None]) -> dict[str, Any]:
    """One resolution's row, added to ``rows`` once the bare decode is measured: synthetic JPEGs generated at it,
    then per worker count each input path and the bare Pillow loop, ``write`` called after every figure so a run
    cut short keeps what finished."""
    root = tmp / f"r{resolution}"
    generate(SyntheticSpec(images=args.images, classes=min(8, args.images), resolution=resolution,
                           val_images=0), root, workers=2)
    train = root / "train"
    shape = dict(batch=args.batch, batches=args.batches, device=device)
    row: dict[str, Any] = {"resolution": resolution, "batch": args.batch, "batches": args.batches,
                           "image_size": args.image_size, "device": str(device),
                           "bare_decode_images_per_s": round(bare_decode(train, **shape), 1)}
    rows.append(row)
    for workers in args.workers:
        for path in paths:
            row[f"{path}_{workers}_workers_images_per_s"] = round(
                measure(train, workers=workers, path=path, image_size=args.image_size, **shape), 1)
            write()  # after every figure: a run cut short keeps what finished
        row[f"bare_pillow_{workers}_workers_images_per_s"] = round(
            bare_pillow(train, workers=workers, image_size=args.image_size, **shape), 1)
        write()
    return row


if __name__ == "__main__":
    raise SystemExit(main())
