"""Benchmark: ImageFolder input-pipeline throughput per CPU core, and what it means for a GPU node.

The pipeline is the ResNet-50 training one: Pillow JPEG decode, RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor (torchvision ImageFolder). Measured two ways:
  * in-process, one thread (torch.set_num_threads(1)): images/s for one core;
  * a DataLoader with N worker processes (default 1 and 2): images/s in total, batch 32.
The data is ``synthetic-imagefolder`` generated first (square JPEGs, ~0.64 bytes/pixel).

Run: python -m bench.benchmarks.datasets_loader [--images 600] [--resolution 256 375]
       [--workers 1 2] [--output float|uint8] [--gpus 8 --per-gpu 1200 --vcpus 64]

--per-gpu 1200 is NVIDIA's ResNet-50 AMP rate on a V100 (DeepLearningExamples); the
defaults describe a p3.16xlarge (8x V100, 64 vCPUs).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import tempfile
import time
from pathlib import Path

from datasets.synthetic import SyntheticSpec, generate


def pipeline(root: Path, output: str = "float"):
    """``float``: ToTensor (float32, what most training scripts hand over); ``uint8``: PILToTensor,
    a quarter of the bytes through the DataLoader's shared memory, normalised on the GPU instead."""
    import torchvision
    from torchvision import transforms

    last = transforms.ToTensor() if output == "float" else transforms.PILToTensor()
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), last])
    return torchvision.datasets.ImageFolder(str(root), transform=tf)


def single_core(root: Path, passes: int, output: str = "float") -> tuple[float, float]:
    """(images per wall second, images per CPU second) for one thread in this process.

    The CPU-second rate does not drop when other processes share the machine."""
    import torch

    torch.set_num_threads(1)
    ds = pipeline(root, output)
    for i in range(min(20, len(ds))):  # warm-up
        ds[i]
    start, cpu, n = time.perf_counter(), time.process_time(), 0
    for _ in range(passes):
        for i in range(len(ds)):
            ds[i]
            n += 1
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu)


def with_workers(root: Path, workers: int, passes: int, batch: int = 32, output: str = "float") -> float:
    import torch

    loader = torch.utils.data.DataLoader(pipeline(root, output), batch_size=batch, shuffle=True, num_workers=workers,
                                         persistent_workers=True, prefetch_factor=4)
    for _ in loader:  # warm-up epoch: starts the workers
        break
    start, n = time.perf_counter(), 0
    for _ in range(passes):
        for images, _labels in loader:
            n += images.shape[0]
    return n / (time.perf_counter() - start)


def node_math(per_core: float, *, gpus: int, per_gpu: float, vcpus: int) -> dict:
    needed = gpus * per_gpu
    cores = math.ceil(needed / per_core)
    return {"needed_images_per_s": needed, "per_core_images_per_s": round(per_core, 1), "cores_needed": cores,
            "vcpus_available": vcpus, "fraction_of_node": round(cores / vcpus, 2),
            "max_images_per_s_all_vcpus": round(per_core * vcpus)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=600)
    p.add_argument("--resolution", type=int, nargs="+", default=[256, 375])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--output", choices=("float", "uint8"), default="float",
                   help="the DataLoader's tensors: float32 (ToTensor) or uint8 (PILToTensor)")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--per-gpu", type=float, default=1200.0)
    p.add_argument("--vcpus", type=int, default=64)
    args = p.parse_args(argv)
    print(f"# {platform.processor() or platform.machine()}, python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="eksbench-loader-") as tmp:
        for resolution in args.resolution:
            root = Path(tmp) / f"r{resolution}"
            generate(SyntheticSpec(images=args.images, classes=10, resolution=resolution, val_images=0), root,
                     workers=2)
            one, per_cpu_s = single_core(root / "train", args.passes, args.output)
            row = {"resolution": resolution, "images": args.images, "output": args.output, "kB_per_image": round(
                sum(f.stat().st_size for f in root.rglob("*.JPEG")) / args.images / 1e3, 1),
                "single_core_images_per_s": round(one, 1), "images_per_cpu_s": round(per_cpu_s, 1)}
            for workers in args.workers:
                row[f"dataloader_{workers}_workers_images_per_s"] = round(
                    with_workers(root / "train", workers, args.passes, output=args.output), 1)
            print(json.dumps(row))
            print(json.dumps({"resolution": resolution, "p3.16xlarge" if args.vcpus == 64 else "node":
                              node_math(per_cpu_s, gpus=args.gpus, per_gpu=args.per_gpu, vcpus=args.vcpus)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
