"""Which precision trains a model faster on this CPU: a few training steps in fp32 and in bf16 autocast, timed.

bf16 instructions do not make bf16 autocast the faster for every model and CPU (``cpu_choice``'s docstring has the
figures), so ``bench run --local`` asks this program once per CPU, torch and model shape, and keeps the answer
(``bench/local/precision_probe.py``)::

    python -m workloads.train.pytorch.precision_probe --threads 1 resnet50,64,16,8 cifar10,64,16,8

(each shape: workload, image size, width per group, batch) prints one JSON line, ``{shape: {"fp32_s": ...,
"bf16_s": ..., "steps": ...}}``: the median seconds of a training step in each precision (the trainer's step:
autocast forward and loss, backward, SGD with momentum, on random images), after a warm-up step each; the two
alternate, so a neighbour's load falls on both. One process measures every shape: torch is imported once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

STEPS = 4  # timed steps of each precision, after one warm-up step each


def measure(workload: str, *, image_size: int, width: int, batch: int, threads: int, steps: int = STEPS) -> dict:
    import torch

    from core.catalog.workload_facts import input_size
    from workloads.train.pytorch.registry import WORKLOADS

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    side = input_size(workload, image_size)
    x = torch.randn(batch, 3, side, side)
    y = torch.randint(0, 10, (batch,))
    ce = torch.nn.CrossEntropyLoss()
    trainers = {}
    for precision, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
        model = WORKLOADS[workload].model(10, width).train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step(model=model, optimizer=optimizer, dtype=dtype) -> float:
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                loss = ce(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return time.perf_counter() - t0
        trainers[precision] = step
    times: dict[str, list[float]] = {p: [] for p in trainers}
    for p, step in trainers.items():
        step()  # warm-up: oneDNN picks and caches its kernels
    for _ in range(steps):
        for p, step in trainers.items():
            times[p].append(step())
    return {f"{p}_s": round(statistics.median(t), 6) for p, t in times.items()} | {"steps": steps}


def shape_text(workload: str, image_size: int, width: int, batch: int) -> str:
    """How a shape is named on the command line and in the output: ``resnet50,64,16,8``."""
    return f"{workload},{image_size},{width},{batch}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m workloads.train.pytorch.precision_probe",
                                description=__doc__.split("\n")[0])
    p.add_argument("shapes", nargs="+", metavar="WORKLOAD,IMAGE_SIZE,WIDTH,BATCH")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=STEPS)
    a = p.parse_args(argv)
    out = {}
    for shape in a.shapes:
        workload, image_size, width, batch = shape.split(",")
        out[shape] = measure(workload, image_size=int(image_size), width=int(width), batch=int(batch),
                             threads=a.threads, steps=a.steps)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
