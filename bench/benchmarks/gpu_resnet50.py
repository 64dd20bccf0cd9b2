"""ResNet-50 training throughput on one GPU: the trainer against a bare torchvision loop, setting by setting, in one run.

``python -m bench.benchmarks.gpu_resnet50 [--settings MODE/PRECISION/BATCH ...] [--steps 200 --warmup 30]
[--json FILE | --save]``; ``--smoke`` runs tiny sizes on whatever device there is (the CPU here; a test calls
it) to prove the script works, not to measure. A setting is the compile mode (``eager``, or a
``torch.compile`` mode: ``default``, ``reduce-overhead`` (CUDA graphs), ``max-autotune``, ...), the
precision and the batch per GPU, e.g. ``default/amp-fp16/384``. ``--settings h100-table`` runs the first
H100 measurements' table: eager amp-fp16 and bf16 at 256, compiled (default and reduce-overhead) amp-fp16 at 256, compiled
amp-fp16 at 384. Without ``--settings``: ``--compile off,on`` x ``--precision`` x ``--batch-size`` (the
older flags). ``--save`` writes the JSON to ``bench/benchmarks/results/gpu_resnet50-<device>-<date>.json``.

For each setting it runs, on synthetic data (one fixed batch on the device, the usual synthetic
benchmark), 1 process, channels_last:

- the trainer (``workloads.train.pytorch.trainer.Run``, harness on: metrics lines every ``--log-every``
  steps, no checkpoints inside the loop) and reads its figures back through the same summary
  code the launcher uses: img/s over steady steps, step-time p50/p95, model FLOPs (FlopCounterMode)
  and MFU against ``core.catalog.peaks``, and its start-up phases (the compile apart);
- a bare loop of the same torchvision model (autocast, the trainer's SGD: momentum, fused on CUDA,
  buffers seeded as ``workloads.train.pytorch.optim`` says why; no metrics, no DDP), timed over the same steady
  steps with CUDA events (or the host clock on a CPU); its last loss is reported, and a non-finite
  one marks the figure as not a result (``finite_loss``).

``overhead`` = bare img/s / trainer img/s (1.0 = the harness costs nothing). The goal: the
trainer's default path >= 6,000 img/s on an H100 (MLPerf v3.0's ~7,000 per H100 is the anchor).
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
from typing import Any, Callable


def bare_loop(*, batch: int, image_size: int, width: int, precision: str, steps: int, warmup: int,
              compile_model: bool, compile_mode: str, device: Any) -> dict[str, Any]:
    """img/s and per-step times of a plain torchvision training loop; nothing else around it."""
    one = _bare_step(batch=batch, image_size=image_size, width=width, precision=precision,
                     compile_model=compile_model, compile_mode=compile_mode, device=device)
    warm_s, times, loss = _timed_steps(one, steps=steps, warmup=warmup, device=device)
    return _loop_figures(batch=batch, steps=steps, times=times, warm_s=warm_s, loss=loss)


def _bare_step(*, batch: int, image_size: int, width: int, precision: str, compile_model: bool, compile_mode: str,
               device: Any) -> Callable[[], Any]:
    """One training step of the bare loop (a seeded torchvision ResNet-50, channels_last, autocast and the
    trainer's SGD on one fixed batch), as a function that returns the step's loss."""
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

    def one() -> Any:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = ce(step_model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return one


def _timed_steps(one: Callable[[], Any], *, steps: int, warmup: int, device: Any) -> tuple[float, list[float], Any]:
    """(the warm-up's seconds, each timed step's seconds, the last loss): ``warmup`` steps untimed, then ``steps``
    steps timed with CUDA events on a GPU (the host clock on a CPU)."""
    import torch

    cuda = device.type == "cuda"
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
    return warm_s, times, loss


def _loop_figures(*, batch: int, steps: int, times: list[float], warm_s: float, loss: Any) -> dict[str, Any]:
    """The bare loop's figures: img/s over the timed steps, their p50/p95, the warm-up's seconds and the last loss
    (None, and ``finite_loss`` False, where it is not a finite number: the figure is then not a result)."""
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
    events = read_jsonl(metrics_dir(results) / "events.jsonl")
    s = metrics_summary(read_rank_metrics(results), [], events, None, precision)
    tp = s["throughput"]
    phases = next((e["phases_s"] for e in events if e.get("event") == "startup"), {})
    return {"img_per_s": tp["samples_per_s_total"], "step_time_p50_s": tp["step_time_p50_s"],
            "startup_phases_s": phases, "compile_s": phases.get("compile"),
            "step_time_p95_s": tp["step_time_p95_s"], "steady_steps": tp["steady_steps"],
            "loop_seconds": s["loop_seconds"], "flops_per_sample": s["flops_per_sample"],
            "tflops_per_s": s["tflops_per_s"], "mfu": s["mfu"], "mfu_note": s["mfu_note"],
            "data_wait_s": s["data_wait_s"], "device": s["device"]}


COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
PRECISIONS = ("bf16", "amp-fp16", "fp32")
# Issue 32's table, measured on one H100 with plain loops (4,932 / 4,005 / 5,912 / 5,988 / 6,044 img/s).
H100_TABLE = ("eager/amp-fp16/256", "eager/bf16/256", "default/amp-fp16/256", "reduce-overhead/amp-fp16/256",
            "default/amp-fp16/384")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def parse_setting(text: str) -> dict[str, Any] | str:
    """``MODE/PRECISION/BATCH`` -> {compile_mode, precision, batch}, or what is wrong with it."""
    parts = text.split("/")
    if len(parts) != 3 or parts[0] not in COMPILE_MODES or parts[1] not in PRECISIONS or not parts[2].isdigit() \
            or int(parts[2]) < 1:
        return (f"--settings={text!r}: a setting is MODE/PRECISION/BATCH with MODE one of {', '.join(COMPILE_MODES)}, "
                f"PRECISION one of {', '.join(PRECISIONS)} and BATCH >= 1, e.g. default/amp-fp16/256 (or h100-table)")
    return {"compile_mode": parts[0], "precision": parts[1], "batch": int(parts[2])}


def settings_of(args: argparse.Namespace) -> list[dict[str, Any]] | str:
    """The settings to run, in order (``--settings``, else the older --compile x --precision x --batch-size)."""
    if args.settings:
        texts = [t for s in args.settings for t in (H100_TABLE if s == "h100-table" else (s,))]
    else:
        texts = []
        for on in [s.strip() for s in args.compile.split(",") if s.strip()]:
            if on not in ("off", "on"):
                return f"--compile={args.compile!r}: a comma list of off and on, e.g. off,on"
            texts.append(f"{args.compile_mode if on == 'on' else 'eager'}/{args.precision}/{args.batch_size}")
    out = []
    for t in texts:
        parsed = parse_setting(t)
        if isinstance(parsed, str):
            return parsed
        out.append(parsed)
    return out


def result_name(device_name: str | None, when: datetime, benchmark: str = "gpu_resnet50") -> str:
    """``<benchmark>-<device>-<YYYY-MM-DD>.json``: one file per run, named by device and date."""
    slug = "".join(c if c.isalnum() else "-" for c in (device_name or "unknown").lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{benchmark}-{slug}-{when.strftime('%Y-%m-%d')}.json"


def main(argv: list[str] | None = None) -> int:
    from bench.errors import fail

    args = parse_args(argv)
    settings = settings_of(args)
    if isinstance(settings, str):
        return fail(settings)
    device = pick_device(smoke=args.smoke)
    os.environ.pop("MASTER_ADDR", None)  # one process, no process group
    tmp = Path(tempfile.mkdtemp(prefix="eksbench-gpu-resnet50-"))
    shape = dict(image_size=args.image_size, width=args.width_per_group, steps=args.steps, warmup=args.warmup)
    rows: list[dict[str, Any]] = []
    started, text = datetime.now(timezone.utc), ""
    try:
        for k, setting in enumerate(settings):
            rows.append(measure_setting(setting, shape, log_every=args.log_every, tmp=tmp / str(k), device=device))
            print_row(rows[-1])
            text = write_results(rows, args, started)  # after every setting: a run cut short keeps what finished
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say_where(rows, args, started, text)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with ``--smoke``'s tiny sizes put in."""
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.gpu_resnet50", description=__doc__.splitlines()[0])
    p.add_argument("--settings", nargs="+", default=None,
                   help="MODE/PRECISION/BATCH each (e.g. eager/amp-fp16/256 default/amp-fp16/384), or h100-table")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--width-per-group", type=int, default=64, help="64 = the real ResNet-50")
    p.add_argument("--precision", default="bf16", choices=PRECISIONS)
    p.add_argument("--steps", type=int, default=200, help="steady steps measured")
    p.add_argument("--warmup", type=int, default=30, help="steps before (compile, cudnn autotuning)")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--compile", default="off,on", help="comma list of off/on (without --settings)")
    p.add_argument("--compile-mode", default="default", choices=COMPILE_MODES[1:])
    p.add_argument("--smoke", action="store_true", help="tiny sizes on any device (proves the script runs)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--save", action="store_true",
                   help="also write them to bench/benchmarks/results/gpu_resnet50-<device>-<date>.json")
    args = p.parse_args(argv)
    if args.smoke:
        args.batch_size, args.image_size, args.width_per_group = 4, 32, 4
        args.steps, args.warmup, args.log_every = 6, 2, 3
        if args.compile == "off,on":
            args.compile = "off"  # compiling takes minutes on a CPU; pass --compile off,on to include it
    return args


def pick_device(*, smoke: bool) -> Any:
    """The first GPU (cuDNN autotuning on), else the CPU with a warning unless this is a smoke run."""
    import torch

    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not cuda and not smoke:
        print("warning: no CUDA device: these are CPU figures, not GPU ones", file=sys.stderr)
    if cuda:
        torch.backends.cudnn.benchmark = True
    return device


def measure_setting(setting: dict[str, Any], shape: dict[str, Any], *, log_every: int, tmp: Path,
                    device: Any) -> dict[str, Any]:
    """One setting's row: the trainer and the bare loop on the same shape, the bare loop's MFU, and their ratio."""
    from core.catalog.peaks import peak_tflops

    on = setting["compile_mode"] != "eager"
    mode = setting["compile_mode"] if on else "default"
    run = dict(shape, batch=setting["batch"], precision=setting["precision"], compile_model=on, compile_mode=mode)
    trainer = trainer_run(**run, log_every=log_every, tmp=tmp)
    bare = bare_loop(**run, device=device)
    flops = trainer["flops_per_sample"]
    device_name = (trainer["device"] or {}).get("name")
    peak, why = peak_tflops(device_name, setting["precision"])
    bare_mfu = round(flops * bare["img_per_s"] / 1e12 / peak, 4) if flops and peak else None
    overhead = (round(bare["img_per_s"] / trainer["img_per_s"], 4)
                if trainer["img_per_s"] and bare["img_per_s"] else None)
    return {"setting": "/".join(str(setting[x]) for x in ("compile_mode", "precision", "batch")),
            **setting, "compile": on, "trainer": trainer,
            "bare": {**bare, "mfu": bare_mfu, "mfu_note": why}, "overhead": overhead}


def say_where(rows: list[dict[str, Any]], args: argparse.Namespace, started: datetime, text: str) -> None:
    """The closing lines: why there is no MFU, where the JSON was saved, or the JSON itself when it went nowhere."""
    if rows and rows[0]["trainer"]["mfu"] is None:
        print(f"MFU: {rows[0]['trainer']['mfu_note']}")
    if args.save and rows:
        print(f"saved {RESULTS_DIR / result_name((rows[0]['trainer']['device'] or {}).get('name'), started)}")
    if not args.json and not args.save:
        print(text)


def print_row(r: dict[str, Any]) -> None:
    t, b = r["trainer"], r["bare"]
    print(f"{r['setting']:>28}: trainer {t['img_per_s']} img/s (p50 {t['step_time_p50_s']} s, p95 "
          f"{t['step_time_p95_s']} s, MFU {t['mfu']}, compile {t['compile_s']} s), bare {b['img_per_s']} img/s "
          f"(MFU {b['mfu']}), bare/trainer {r['overhead']}", flush=True)


def write_results(rows: list[dict[str, Any]], args: argparse.Namespace, started: datetime) -> str:
    """The results so far as JSON, written to ``--json`` and (``--save``) the results folder; returns the text."""
    device_info = rows[0]["trainer"]["device"] if rows else None
    doc = {"benchmark": "gpu_resnet50", "smoke": args.smoke, "date": started.strftime("%Y-%m-%d %H:%M UTC"),
           "device": device_info, "python": platform.python_version(),
           "config": {k: v for k, v in vars(args).items() if k not in ("json", "save")}, "results": rows}
    text = json.dumps(doc, indent=2)
    save_json(text, args.json, result_name((device_info or {}).get("name"), started) if args.save else None)
    return text


def save_json(text: str, path: str | None, saved_name: str | None) -> None:
    """``text`` to ``path`` (``--json``) and as ``saved_name`` in the results folder (``--save``), each to a
    temporary file then renamed: a benchmark killed while it rewrites its JSON leaves the previous one whole."""
    from workloads.train.common.files import atomic_write

    data = text.encode()
    for target in filter(None, (path and Path(path), saved_name and RESULTS_DIR / saved_name)):
        atomic_write(target, lambda f: f.write(data))


if __name__ == "__main__":
    raise SystemExit(main())
