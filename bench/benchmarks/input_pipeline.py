"""The trainer's own ImageFolder input pipeline (``workloads.train.common.data.ImageFolderImages``), end to end.

``python -m bench.benchmarks.input_pipeline [--images 512 --resolution 256 433 --workers 0 1 2
--batch 32 --batches 12]``

Measures images/s out of ``batch()``: the DataLoader (uint8 batches), the copy to the device
(here the CPU: no copy) and the normalisation to float32 channels_last, for both decode paths:
Pillow in the workers (``pillow``), and the workers reading JPEG bytes while the training process
decodes with ``torchvision.io.decode_jpeg`` and crops (``decode_jpeg``; on a GPU node that is
nvJPEG on the GPU, here libjpeg-turbo on the CPU, in the main process). The first batch (worker
start-up) is not timed. On a CPU this prices the host side only; it says nothing about nvJPEG.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

from datasets.synthetic import SyntheticSpec, generate


def measure(root: Path, *, workers: int, gpu_decode: bool, batch: int, batches: int) -> float:
    import torch

    from workloads.train.common.data import ImageFolderImages, Position

    src = ImageFolderImages(root, image_size=224, device=torch.device("cpu"), channels_last=True, workers=workers,
                            gpu_decode=gpu_decode)
    src.start(Position(), global_batch=batch, rank=0, batch=batch, seed=0)
    src.batch(Position())  # worker start-up and the first batch: not timed
    t0 = time.perf_counter()
    for _ in range(batches):
        x, _ = src.batch(Position())
    dt = time.perf_counter() - t0
    src.close()
    assert x.dtype == torch.float32 and x.shape == (batch, 3, 224, 224)
    return batch * batches / dt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.input_pipeline", description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--resolution", type=int, nargs="+", default=[256, 433])
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches", type=int, default=12)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the training process")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    print(f"# {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"torch {torch.__version__}, {args.threads} torch thread(s) in the training process")
    with tempfile.TemporaryDirectory(prefix="eksbench-pipeline-") as tmp:
        for resolution in args.resolution:
            root = Path(tmp) / f"r{resolution}"
            generate(SyntheticSpec(images=args.images, classes=8, resolution=resolution, val_images=0), root,
                     workers=2)
            row: dict = {"resolution": resolution, "batch": args.batch, "batches": args.batches}
            for workers in args.workers:
                for name, gpu_decode in (("pillow", False), ("decode_jpeg", True)):
                    row[f"{name}_{workers}_workers_images_per_s"] = round(
                        measure(root / "train", workers=workers, gpu_decode=gpu_decode, batch=args.batch,
                                batches=args.batches), 1)
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
