"""The training command line (the contract the Job manifests call), parsed into a frozen object.

Kept apart from the training loop so the manifests' builder, the launcher's summary and
the local runner can parse or build these arguments without importing torch.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Sequence

WORKLOADS = ("resnet50", "cifar10", "maskrcnn")
PRECISIONS = ("fp32", "amp-fp16", "bf16")
# torch.compile modes; "reduce-overhead" and "max-autotune" capture CUDA graphs on GPU.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class TrainArgs:
    workload: str = "resnet50"
    batch_size: int = 32
    precision: str = "fp32"
    steps: int = 100
    epochs: int = 0
    dataset: str = "synthetic"
    data_dir: str = "/data/datasets"
    results_dir: str = "results"
    checkpoint_every: int = 0  # steps; 0 = not step-based (tests and the local run set it)
    checkpoint_minutes: float = 10.0  # wall-clock minutes between checkpoints; 0 = off
    image_size: int = 224
    width_per_group: int = 64
    channels_last: bool = True
    compile: bool = False
    compile_mode: str = "default"
    warmup_steps: int = 10
    seed: int = 0
    target_accuracy: float | None = None
    lr: float | None = None
    log_every: int = 50  # a metrics line (one device sync, one .item()) every N steps
    workers: int = 2
    gpu_decode: bool = False  # ImageFolder: read JPEG bytes in the workers, decode on the GPU
    collective_timeout: int = 300
    harness: bool = True  # False: no metrics files, no checkpoints (the overhead benchmark's bare loop)

    @property
    def by_epochs(self) -> bool:
        return self.epochs > 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 1")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 0")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 0")
    return value


def build_parser(prog: str = "python -m workloads.train") -> argparse.ArgumentParser:
    d = TrainArgs()
    p = argparse.ArgumentParser(prog=prog, description="Train one benchmark workload (run under torchrun).")
    p.add_argument("--workload", choices=WORKLOADS, default=d.workload)
    p.add_argument("--batch-size", type=_positive, default=d.batch_size, help="per process")
    p.add_argument("--precision", choices=PRECISIONS, default=d.precision)
    p.add_argument("--steps", type=_positive, default=d.steps, help="global optimizer steps (when --epochs 0)")
    p.add_argument("--epochs", type=_non_negative, default=d.epochs, help="0 = train by --steps")
    p.add_argument("--dataset", default=d.dataset, help='"synthetic" or a folder name under --data-dir')
    p.add_argument("--data-dir", default=d.data_dir)
    p.add_argument("--results-dir", default=d.results_dir)
    p.add_argument("--checkpoint-every", type=_non_negative, default=d.checkpoint_every,
                   help="checkpoint every N steps (0 = not step-based)")
    p.add_argument("--checkpoint-minutes", type=_non_negative_float, default=d.checkpoint_minutes,
                   help="checkpoint every N minutes of wall time (0 = off); with both 0, only at the end")
    p.add_argument("--image-size", type=_positive, default=d.image_size)
    p.add_argument("--width-per-group", type=_positive, default=d.width_per_group)
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=d.channels_last)
    p.add_argument("--compile", action="store_true", default=d.compile, help="torch.compile the model")
    p.add_argument("--compile-mode", choices=COMPILE_MODES, default=d.compile_mode,
                   help="torch.compile mode (reduce-overhead and max-autotune use CUDA graphs)")
    p.add_argument("--warmup-steps", type=_non_negative, default=d.warmup_steps,
                   help="steps after each (re)start left out of throughput")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--target-accuracy", type=float, default=None, help="cifar10: report time to this accuracy")
    p.add_argument("--lr", type=float, default=None, help="default: 0.1 x global batch / 256 (0.02 for maskrcnn)")
    p.add_argument("--log-every", type=_positive, default=d.log_every,
                   help="write a metrics line (and sync the device) every N steps")
    p.add_argument("--workers", type=_non_negative, default=d.workers, help="data loader processes (ImageFolder)")
    p.add_argument("--gpu-decode", action="store_true", default=d.gpu_decode,
                   help="ImageFolder: decode JPEGs with torchvision.io.decode_jpeg on the GPU")
    p.add_argument("--collective-timeout", type=_positive, default=d.collective_timeout, help="seconds")
    p.add_argument("--no-harness", dest="harness", action="store_false",
                   help="benchmark only: no metrics files and no checkpoints")
    return p


def parse_train_args(argv: Sequence[str]) -> TrainArgs:
    ns = build_parser().parse_args(list(argv))
    return TrainArgs(**{f.name: getattr(ns, f.name) for f in fields(TrainArgs)})


def train_args_to_argv(args: TrainArgs) -> list[str]:
    """The command line that parses back to ``args`` (what the runner and manifests pass)."""
    d = TrainArgs()
    out = [f"--workload={args.workload}", f"--batch-size={args.batch_size}", f"--precision={args.precision}",
           f"--steps={args.steps}", f"--epochs={args.epochs}", f"--dataset={args.dataset}",
           f"--data-dir={args.data_dir}", f"--results-dir={args.results_dir}",
           f"--checkpoint-every={args.checkpoint_every}", f"--image-size={args.image_size}",
           f"--width-per-group={args.width_per_group}",
           "--channels-last" if args.channels_last else "--no-channels-last",
           f"--warmup-steps={args.warmup_steps}", f"--seed={args.seed}",
           f"--collective-timeout={args.collective_timeout}"]
    if args.compile:
        out.append("--compile")
    if args.gpu_decode:
        out.append("--gpu-decode")
    if args.target_accuracy is not None:
        out.append(f"--target-accuracy={args.target_accuracy}")
    if args.lr is not None:
        out.append(f"--lr={args.lr}")
    for name in ("checkpoint_minutes", "compile_mode", "log_every", "workers"):
        if getattr(args, name) != getattr(d, name):
            out.append(f"--{name.replace('_', '-')}={getattr(args, name)}")
    if not args.harness:
        out.append("--no-harness")
    return out
