"""Benchmark: how fast ``synthetic-imagefolder`` generates JPEGs (images/s and MB/s).

Run: python -m bench.benchmarks.datasets_synthetic [--images 400] [--resolution 224 256]
       [--workers 1 2]

It writes into a temporary directory and deletes it. Numbers are for this machine
(report the CPU with them); generation is embarrassingly parallel, so it scales
with cores until the disk is the limit.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path

from datasets.synthetic import SyntheticSpec, generate


def measure(images: int, resolution: int, workers: int, root: Path) -> dict:
    spec = SyntheticSpec(images=images, classes=10, resolution=resolution, seed=0, val_images=0)
    out = root / f"r{resolution}-w{workers}"
    start, cpu = time.perf_counter(), time.process_time()
    plan = generate(spec, out, workers=workers)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    nbytes = sum(p.stat().st_size for p in plan.values())
    shutil.rmtree(out)
    return {"resolution": resolution, "workers": workers, "images": len(plan), "seconds": round(seconds, 3),
            "images_per_s": round(len(plan) / seconds, 1), "MB_per_s": round(nbytes / seconds / 1e6, 2),
            "kB_per_image": round(nbytes / len(plan) / 1e3, 1),
            "images_per_cpu_s": round(len(plan) / cpu_seconds, 1)}  # robust to other processes on the machine


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=400)
    p.add_argument("--resolution", type=int, nargs="+", default=[224, 256])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = p.parse_args(argv)
    print(f"# {platform.processor() or platform.machine()}, python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="eksbench-synth-") as tmp:
        measure(20, 64, 1, Path(tmp))  # warm up imports and the allocator
        for resolution in args.resolution:
            for workers in args.workers:
                print(json.dumps(measure(args.images, resolution, workers, Path(tmp))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
