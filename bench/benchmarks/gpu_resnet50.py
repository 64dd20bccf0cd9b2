"""ResNet-50 training throughput on one GPU: the trainer against a bare torchvision loop, in one run.

``python -m bench.benchmarks.gpu_resnet50 [--batch-size 256 --steps 200 --warmup 30 --precision bf16
--compile off,on --compile-mode default] [--json FILE]``; ``--smoke`` runs tiny sizes on whatever
device there is (the CPU here; a test calls it) to prove the script works, not to measure.

For each compile setting it runs, on synthetic data (one fixed batch on the device, the
usual synthetic benchmark), 1 process, channels_last:

- the trainer (``workloads.train.pytorch.trainer.Run``, harness on: metrics lines every ``--log-every``
  steps, no checkpoints inside the loop) and reads its figures back through the same summary
  code the launcher uses: img/s over steady steps, step-time p50/p95, model FLOPs (FlopCounterMode)
  and MFU against ``core.catalog.peaks``;
- a bare loop of the same torchvision model (autocast, the trainer's SGD: momentum, fused on CUDA,
  buffers seeded as ``workloads.train.pytorch.optim`` says why; no metrics, no DDP), timed over the same steady
  steps with CUDA events (or the host clock on a CPU); its last loss is reported, and a non-finite
  one marks the figure as not a result (``finite_loss``).

``overhead`` = bare img/s / trainer img/s (1.0 = the harness costs nothing). Goals from the
"GPU throughput you can trust" issue: >= 5,000 img/s per H100 with bf16 + channels_last +
compile, >= 30% MFU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def bare_loop(*, batch: int, image_size: int, width: int, precision: str, steps: int, warmup: int,
              compile_model: bool, compile_mode: str, device: Any) -> dict[str, Any]:
    """img/s and per-step times of a plain torchvision training loop; nothing else around it."""
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None, width_per_group=width).to(device)
    model = model.to(memory_format=torch.channels_last)
    from workloads.train.pytorch.optim import sgd

    opt = sgd(model.parameters(), lr=0.1, fused=device.type == "cuda")
    x = torch.randn(batch, 3, image_size, image_size, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=device)
    step_model = torch.compile(model, mode=None if compile_mode == "default" else compile_mode) if compile_model \
        else model
    dtype = {"bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "amp-fp16")
    ce = torch.nn.CrossEntropyLoss()
    cuda = device.type == "cuda"

    def one() -> Any:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = ce(step_model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    t0 = time.perf_counter()
    for _ in range(warmup):
        one()
    if cuda:
        torch.cuda.synchronize(device)
    warm_s = time.perf_counter() - t0
    marks: list[Any] = []

    def mark() -> Any:
        if cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    marks.append(mark())
    loss = None
    for _ in range(steps):
        loss = one()
        marks.append(mark())
    if cuda:
        torch.cuda.synchronize(device)
        times = [a.elapsed_time(b) / 1000 for a, b in zip(marks, marks[1:])]
    else:
        times = [b - a for a, b in zip(marks, marks[1:])]
    import math

    from workloads.train.harness.summary import quantile

    total = sum(times)
    last = float(loss.item()) if loss is not None else None
    finite = last is not None and math.isfinite(last)
    return {"img_per_s": round(batch * steps / total, 2), "step_time_p50_s": quantile(times, 0.5),
            "step_time_p95_s": quantile(times, 0.95), "warmup_s": round(warm_s, 3), "steps": steps,
            "final_loss": last if finite else None, "finite_loss": finite}


def trainer_run(*, batch: int, image_size: int, width: int, precision: str, steps: int, warmup: int,
                compile_model: bool, compile_mode: str, log_every: int, tmp: Path) -> dict[str, Any]:
    """The trainer on the same shape; its figures through the launcher's summary code."""
    from core.contract.train_args import TrainArgs
    from workloads.train.common.metrics import (
        metrics_dir,
        read_jsonl,
        read_rank_metrics,
    )
    from workloads.train.harness.summary import metrics_summary
    from workloads.train.pytorch.trainer import Run

    results = tmp / f"trainer-{'compiled' if compile_model else 'eager'}"
    args = TrainArgs(workload="resnet50", batch_size=batch, precision=precision, steps=warmup + steps,
                     dataset="synthetic", data_dir=str(tmp), results_dir=str(results), checkpoint_every=0,
                     checkpoint_minutes=0, image_size=image_size, width_per_group=width, channels_last=True,
                     compile=compile_model, compile_mode=compile_mode, warmup_steps=warmup, log_every=log_every)
    run = Run(args, {"rank": 0, "world_size": 1, "local_rank": 0, "restart": 0})
    try:
        run.build()
        run.train()
    finally:
        run.close()
    s = metrics_summary(read_rank_metrics(results), [], read_jsonl(metrics_dir(results) / "events.jsonl"), None,
                        precision)
    tp = s["throughput"]
    return {"img_per_s": tp["samples_per_s_total"], "step_time_p50_s": tp["step_time_p50_s"],
            "step_time_p95_s": tp["step_time_p95_s"], "steady_steps": tp["steady_steps"],
            "loop_seconds": s["loop_seconds"], "flops_per_sample": s["flops_per_sample"],
            "tflops_per_s": s["tflops_per_s"], "mfu": s["mfu"], "mfu_note": s["mfu_note"],
            "data_wait_s": s["data_wait_s"], "device": s["device"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.gpu_resnet50", description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--width-per-group", type=int, default=64, help="64 = the real ResNet-50")
    p.add_argument("--precision", default="bf16", choices=("bf16", "amp-fp16", "fp32"))
    p.add_argument("--steps", type=int, default=200, help="steady steps measured")
    p.add_argument("--warmup", type=int, default=30, help="steps before (compile, cudnn autotuning)")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--compile", default="off,on", help="comma list of off/on")
    p.add_argument("--compile-mode", default="default")
    p.add_argument("--smoke", action="store_true", help="tiny sizes on any device (proves the script runs)")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    if args.smoke:
        args.batch_size, args.image_size, args.width_per_group = 4, 32, 4
        args.steps, args.warmup, args.log_every = 6, 2, 3
        if args.compile == "off,on":
            args.compile = "off"  # compiling takes minutes on a CPU; pass --compile off,on to include it

    import torch

    from core.catalog.peaks import peak_tflops

    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not cuda and not args.smoke:
        print("warning: no CUDA device: these are CPU figures, not GPU ones", file=sys.stderr)
    if cuda:
        torch.backends.cudnn.benchmark = True
    os.environ.pop("MASTER_ADDR", None)  # one process, no process group
    tmp = Path(tempfile.mkdtemp(prefix="eksbench-gpu-resnet50-"))
    shape = dict(batch=args.batch_size, image_size=args.image_size, width=args.width_per_group,
                 precision=args.precision, steps=args.steps, warmup=args.warmup, compile_mode=args.compile_mode)
    rows = []
    try:
        for setting in [s.strip() for s in args.compile.split(",") if s.strip()]:
            on = setting == "on"
            trainer = trainer_run(**shape, compile_model=on, log_every=args.log_every, tmp=tmp)
            bare = bare_loop(**shape, compile_model=on, device=device)
            flops = trainer["flops_per_sample"]
            device_name = (trainer["device"] or {}).get("name")
            peak, why = peak_tflops(device_name, args.precision)
            bare_mfu = round(flops * bare["img_per_s"] / 1e12 / peak, 4) if flops and peak else None
            overhead = (round(bare["img_per_s"] / trainer["img_per_s"], 4)
                        if trainer["img_per_s"] and bare["img_per_s"] else None)
            rows.append({"compile": on, "trainer": trainer, "bare": {**bare, "mfu": bare_mfu, "mfu_note": why},
                         "overhead": overhead})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    doc = {"benchmark": "gpu_resnet50", "smoke": args.smoke,
           "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "device": rows[0]["trainer"]["device"] if rows else None, "python": platform.python_version(),
           "config": {k: v for k, v in vars(args).items() if k != "json"}, "results": rows}
    for r in rows:
        t, b = r["trainer"], r["bare"]
        print(f"compile {'on ' if r['compile'] else 'off'}: trainer {t['img_per_s']} img/s "
              f"(p50 {t['step_time_p50_s']} s, p95 {t['step_time_p95_s']} s, MFU {t['mfu']}), "
              f"bare {b['img_per_s']} img/s (MFU {b['mfu']}), bare/trainer {r['overhead']}")
    if rows and rows[0]["trainer"]["mfu"] is None:
        print(f"MFU: {rows[0]['trainer']['mfu_note']}")
    text = json.dumps(doc, indent=2)
    if args.json:
        Path(args.json).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
