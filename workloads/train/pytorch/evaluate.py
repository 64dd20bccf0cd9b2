"""The evaluation job: load a training checkpoint and write test accuracy to ``<results-dir>/eval.json``.

``python -m workloads.train.pytorch.evaluate --workload cifar10 --checkpoint FILE --data-dir DIR --results-dir DIR
[--results-uri s3://bucket/prefix/]``
The model shape (width, classes) comes from the arguments saved in the checkpoint, so the
evaluation job needs no copy of the training flags. Single process; CUDA when available.
With ``--results-uri`` it uploads ``eval.json`` (only that key: the training's launcher owns
the rest of the prefix) with boto3's default credentials; a failed upload exits 3.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Sequence

from core.catalog.workload_facts import WORKLOADS
from core.contract import strict_json
from core.contract.names import EVAL_FILE
from workloads.train.common.files import atomic_write


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workloads.train.pytorch.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=tuple(w for w, facts in WORKLOADS.items() if facts.evaluates),
                   required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--results-dir", required=True)
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--results-uri", default=None, help="s3://bucket/prefix/: upload eval.json there")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    from core.contract.s3_uri import parse_s3_uri
    from workloads.train.harness.upload import upload

    try:
        target = parse_s3_uri(args.results_uri) if args.results_uri else None
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not Path(args.checkpoint).is_file():
        print(f"error: checkpoint {args.checkpoint}: no such file", file=sys.stderr)
        return 2
    import torch

    from workloads.train.common.cpu_choice import precision_on
    from workloads.train.common.schedule import autocast_factory
    from workloads.train.pytorch.checkpoint import load
    from workloads.train.pytorch.registry import WORKLOADS as CODE

    started = time.time()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    state = load(args.checkpoint)
    saved = state.get("args", {})
    model = CODE[args.workload].model(state.get("num_classes") or 10, saved.get("width_per_group", 64))
    model.load_state_dict(state["model"])
    model.to(device)
    precision = precision_on(device.type, saved.get("precision", "fp32"))  # as the trainer chose on this device
    result = CODE[args.workload].evaluate(model, args.data_dir, device=device,
                                          autocast=autocast_factory(precision, device.type), batch=args.batch_size)
    doc = {"workload": args.workload, "checkpoint": args.checkpoint, "step": state.get("step"),
           "epoch": state.get("epoch"), **result, "seconds": round(time.time() - started, 3)}
    text = strict_json.dumps(doc, indent=2).encode()
    path = atomic_write(Path(args.results_dir) / EVAL_FILE, lambda f: f.write(text))
    print(f"[evaluate] {args.workload}: accuracy {result['accuracy']:.4f} on {result['samples']} test images "
          f"(step {state.get('step')})", flush=True)
    if target:
        bucket, prefix = target
        errors = upload([(path, f"{prefix}{EVAL_FILE}")], bucket)
        for err in errors:
            print(f"upload failed: {err}", file=sys.stderr)
        if errors:
            return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
