"""Llama 3 training throughput on one device: the product's model (``workloads.train.pytorch.llama``) with a shape's
layers cut to what fits, setting by setting, in tokens/s and MFU.

``python -m bench.benchmarks.llm_layers [--model-size 8b] [--layers 4] [--seq-len 8192] [--batch 1]
[--settings eager/bf16 default/bf16 default/fp8] [--steps 30 --warmup 10] [--json FILE | --save]``; ``--smoke``: tiny
sizes on whatever device there is (the CPU here; a test calls it) to prove the script works, not to measure.

Why cut layers: one GPU holds the whole model and its AdamW state (16 B a parameter in fp32), so an 8B model does
not fit one 80 GB H100; its layers all have the same shape, so ``--layers k`` measures k of them with the real
width, heads, FFN, vocabulary and sequence, and the figures count that model's own FLOPs
(``core.catalog.llm.LlamaShape.flops_per_token`` of the cut shape), which is what MFU divides. The printed layer
count says what was measured.

A setting is the compile mode (``eager``, or ``default``: ``torch.compile`` per block, as the trainer compiles) and
the precision: ``fp32``, ``bf16`` (bf16 autocast over fp32 weights: one process has no FSDP mixed-precision policy) or
``fp8`` (torchao's float8 linears, tensorwise, the output kept in bf16, under bf16 autocast; H100/H200 only).
Timing: CUDA events around each steady step (host clock on a CPU), after ``--warmup`` steps that hold the compile.
MFU is against the bf16 peak (TorchTitan's and AWS's convention, also for fp8), with ``mfu_fp8_peak`` (NVIDIA's)
for fp8.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.catalog.llm import MODELS, mfu
from core.catalog.peaks import fp8_peak_tflops, peak_tflops

RESULTS = Path(__file__).parent / "results"


def one_setting(setting: str, *, shape: Any, seq_len: int, batch: int, steps: int, warmup: int) -> dict[str, Any]:
    """Train the cut model ``steps`` steps at ``setting`` (MODE/PRECISION) on one fixed random batch; its figures."""
    import torch

    from workloads.train.pytorch.language_model import ADAMW, lm_loss
    from workloads.train.pytorch.llama import build_llama
    from workloads.train.pytorch.llama_parallel import parallelize

    mode, precision = setting.split("/")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with torch.device("meta"):
        model = build_llama(shape, seq_len)
    model = parallelize(model, None, tp=1, activation_checkpoint="none", compile=mode != "eager",
                        precision=precision, fp8_recipe="tensorwise")
    model.to_empty(device=device)
    model.init_weights(0, buffer_device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **ADAMW, **({"fused": True} if device.type == "cuda"
                                                                           else {}))
    x = torch.randint(0, shape.vocab_size, (batch, seq_len + 1), device=device)
    inputs, targets = x[:, :-1], x[:, 1:]
    dtype = torch.bfloat16 if precision in ("bf16", "fp8") else None
    times, loss = [], None
    for k in range(warmup + steps):
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = lm_loss(model, inputs, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if k >= warmup:
            times.append(time.perf_counter() - start)
    return figures(setting, shape=shape, seq_len=seq_len, batch=batch, times=times, loss=float(loss.item()),
                   device=torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                   peak_gib=torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None)


def figures(setting: str, *, shape: Any, seq_len: int, batch: int, times: list[float], loss: float, device: str,
            peak_gib: float | None) -> dict[str, Any]:
    """Tokens/s, TFLOP/s and MFU of the steady steps (their median step time), as BENCHMARKS.md gives them."""
    import math
    import statistics

    precision = setting.split("/")[1]
    per_token = shape.flops_per_token(seq_len)
    step = statistics.median(times)
    tokens_per_s = batch * seq_len / step
    peak, _ = peak_tflops(device, precision)
    fp8_peak = fp8_peak_tflops(device) if precision == "fp8" else None
    return {"setting": setting, "device": device, "layers": shape.n_layers, "parameters": shape.parameters,
            "seq_len": seq_len, "batch": batch, "steady_steps": len(times), "step_time_p50_s": round(step, 5),
            "tokens_per_s": round(tokens_per_s, 1), "flops_per_token": per_token,
            "tflops_per_s": round(per_token * tokens_per_s / 1e12, 3),
            "mfu": round(mfu(per_token, tokens_per_s, peak), 4) if peak else None,
            "mfu_fp8_peak": round(mfu(per_token, tokens_per_s, fp8_peak), 4) if fp8_peak else None,
            "peak_memory_gib": round(peak_gib, 2) if peak_gib else None,
            "final_loss": loss, "finite_loss": math.isfinite(loss)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.llm_layers", description=__doc__.split("\n\n")[0])
    p.add_argument("--model-size", default="8b", choices=tuple(MODELS))
    p.add_argument("--layers", type=int, default=4, help="the shape's layers kept (its width, heads and vocabulary "
                                                         "stay)")
    p.add_argument("--seq-len", type=int, default=8192)
    p.add_argument("--batch", type=int, default=1, help="sequences per step")
    p.add_argument("--settings", nargs="+", default=["eager/bf16", "default/bf16", "default/fp8"])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--json", type=Path)
    p.add_argument("--save", action="store_true", help=f"also keep the JSON under {RESULTS}")
    p.add_argument("--smoke", action="store_true", help="tiny sizes on whatever device there is, to prove the script")
    a = p.parse_args(argv)
    if a.smoke:
        a.model_size, a.layers, a.seq_len, a.batch, a.steps, a.warmup = "tiny", 2, 32, 2, 3, 1
        a.settings = [s for s in a.settings if not s.endswith("/fp8")] or ["eager/fp32"]
    shape = replace(MODELS[a.model_size], n_layers=min(a.layers, MODELS[a.model_size].n_layers))
    out = {"model_size": a.model_size, "layers": shape.n_layers, "of_layers": MODELS[a.model_size].n_layers,
           "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "results": []}
    for setting in a.settings:
        try:
            row = one_setting(setting, shape=shape, seq_len=a.seq_len, batch=a.batch, steps=a.steps, warmup=a.warmup)
        except Exception as e:  # noqa: BLE001 - one setting's failure (fp8 off Hopper, out of memory) is a result too
            row = {"setting": setting, "error": f"{type(e).__name__}: {e}"[:500]}
        out["results"].append(row)
        print(json.dumps(row), flush=True)
        write(out, a.json, a.save)
    return 0 if all("error" not in r and r["finite_loss"] for r in out["results"]) else 1


def write(out: dict[str, Any], path: Path | None, save: bool) -> None:
    """The JSON after every setting, so what finished is kept when a time limit stops the rest."""
    text = json.dumps(out, indent=2)
    if path:
        path.write_text(text)
    if save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"llm_layers-{out['model_size']}-{out['date']}.json").write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
