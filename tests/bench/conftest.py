"""Fixtures for the results/report/notebook tests: fake results trees (pure cases) and one real local run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.datasets.conftest import aws, s3  # noqa: F401 - moto's S3, for bench data
from tests.support.processes import etcd  # noqa: F401 - a loopback etcd, for the local runner

ROOT = Path(__file__).resolve().parents[2]


def rank_lines(rank: int, steps: int = 8, step_time: float = 0.5, batch: int = 32, world: int = 2,
               restart_at: int | None = None) -> list[dict[str, Any]]:
    out = []
    for step in range(1, steps + 1):
        restart = int(restart_at is not None and step >= restart_at)
        out.append({"step": step, "epoch": 0, "loss": 2.0 / step, "samples": batch,
                    "step_time_s": step_time * (1 + 0.1 * (step % 3)), "samples_per_s": batch / step_time,
                    "wall_time": 1_700_000_000 + step, "world_size": world, "rank": rank, "restart": restart,
                    "warmup": step <= 2 or step == restart_at})
    return out


def summary(experiment: str, *, nodes: int = 1, gpus: int = 8, rate: float = 1000.0, status: str = "succeeded",
            **extra: Any) -> dict[str, Any]:
    doc = {"experiment": experiment, "status": status, "exit_code": 0 if status == "succeeded" else 1,
           "node_id": "node-0", "started_at": "2026-01-01T00:00:00Z", "wall_time_s": 3600.0,
           "image": "123.dkr.ecr.us-west-2.amazonaws.com/eksbench:abc", "git_commit": "abc123",
           "results_uri": None, "command": ["python", "-m", "torch.distributed.run", f"--nnodes={nodes}",
                                            f"--nproc-per-node={gpus}"],
           # the launch shape the launcher records beside the command (core.contract.launch_command.Launched)
           "launch": {"nodes": nodes, "procs_per_node": gpus},
           "config": {"workload": "resnet50", "batch_size": 256, "precision": "amp-fp16"},
           "throughput": {"samples_per_s_total": rate, "samples_per_s_per_process": rate / (nodes * gpus)},
           "restarts": 0, "world_sizes": [nodes * gpus],
           "accuracy": {"best_accuracy": None, "target_accuracy": None, "time_to_accuracy_s": None},
           "instance_type": "p4d.24xlarge", "device": {"name": "NVIDIA A100-SXM4-40GB", "torch": "2.14.1"},
           "what_ran": {"region": "us-west-2"}}  # the region prices the instance (core.catalog.aws.usd_per_hour)
    doc.update(extra)
    return doc


FLOPS_8B = 57_914_449_920  # Llama 3 8B's training FLOPs per token at sequence length 8192 (core.catalog.llm)


def llama3_summary(experiment: str, *, nodes: int = 1, tokens_per_gpu: float = 6000.0, precision: str = "bf16",
                   power_w: float | None = 650.0, val_losses: tuple = ((100, 2.95), (200, 2.71)), **extra: Any
                   ) -> dict[str, Any]:
    """A Llama 3 8B run's summary.json on ``nodes`` p5.48xlarge (8 H100 each) at seq 8192, one sequence per GPU,
    as the launcher writes it (workloads.train.harness.language_model_summary), written out by hand: the token
    rate per GPU, its MFU against the bf16 peak (989 TFLOP/s; float8 also against the fp8 peak, 1,979), each GPU
    drawing ``power_w`` (None: no telemetry), a validation loss at each (step, loss)."""
    gpus, seq = 8 * nodes, 8192
    tokens = tokens_per_gpu * gpus
    tflops = FLOPS_8B * tokens_per_gpu / 1e12
    vals = [{"step": step, "tokens": step * gpus * seq, "val_loss": loss, "elapsed_s": step * seq / tokens_per_gpu}
            for step, loss in val_losses]
    block = {"model_size": "8b", "parameters": 8_030_261_248, "seq_len": seq, "tensor_parallel": 1,
             "data_parallel": gpus, "sharding": "fsdp", "activation_checkpoint": "selective",
             "fp8_recipe": "tensorwise" if precision == "fp8" else None, "mesh": {"dp_shard": gpus},
             "tokens_per_s": tokens, "tokens_per_s_per_device": tokens_per_gpu, "flops_per_token": FLOPS_8B,
             "tokens_per_sequence": seq, "tflops_per_s_per_gpu": round(tflops, 6), "mfu": round(tflops / 989, 6),
             "mfu_convention": "against the bf16 peak, 989 TFLOP/s" + (" (TorchTitan's and AWS's for float8)"
                                                                     if precision == "fp8" else ""),
             "mfu_fp8_peak": round(tflops / 1979, 6) if precision == "fp8" else None, "data_wait_share": 0.01,
             "first_loss": 11.9, "final_loss": 2.68, "val_losses": vals,
             "final_val_loss": vals[-1]["val_loss"] if vals else None, "target_loss": 2.8,
             "tokens_to_target_loss": next((v["tokens"] for v in vals if v["val_loss"] <= 2.8), None),
             "time_to_target_loss_s": next((v["elapsed_s"] for v in vals if v["val_loss"] <= 2.8), None)}
    doc = summary(experiment, nodes=nodes, rate=tokens / seq, instance_type="p5.48xlarge",
                  config={"workload": "llama3", "batch_size": 1, "precision": precision, "compile": True},
                  throughput={"samples_per_s_total": tokens / seq, "samples_per_s_per_process": tokens_per_gpu / seq,
                              "samples_per_s_per_device": tokens_per_gpu / seq, "step_time_p50_s": seq / tokens_per_gpu,
                              "step_time_p95_s": 1.1 * seq / tokens_per_gpu, "steady_seconds": 600.0},
                  device={"name": "NVIDIA H100 80GB HBM3", "torch": "2.14.1", "peak_memory_gib": 61.5},
                  what_ran={"region": "us-east-1"}, mfu=round(tflops / 989, 6), precision=precision,
                  data_wait_s=6.0, language_model=block)
    if power_w is not None:
        doc["telemetry"] = {"source": "nvml", "nodes": nodes, "gpus": gpus, "power_mean_w": power_w * gpus,
                            "energy_j": power_w * gpus * 700.0, "util_mean_pct": 97.0}
    doc.update(extra)
    return doc


def write_experiment(root: Path, rel: str, doc: dict[str, Any] | str | None, ranks: int = 2,
                     **lines: Any) -> Path:
    """``root/rel/`` with summary.json (a dict, raw text, or none) and ``ranks`` metrics files."""
    d = root / rel
    (d / "metrics").mkdir(parents=True, exist_ok=True)
    if doc is not None:
        (d / "summary.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    for r in range(ranks):
        text = "\n".join(json.dumps(x) for x in rank_lines(r, **lines))
        (d / "metrics" / f"rank-{r}.jsonl").write_text(text + "\n")
    return d


@pytest.fixture(scope="module")
def scaling_tree(tmp_path_factory) -> Path:
    """results/<stack>/r1/: resnet50 at 1, 2 and 4 nodes (95% and 85% efficient), one failed run. Read only."""
    root = tmp_path_factory.mktemp("fake") / "results"
    for n, rate in ((1, 1000.0), (2, 1900.0), (4, 3400.0)):
        write_experiment(root, f"gpu/r1/resnet50-{n}n", summary(f"resnet50-{n}n", nodes=n, rate=rate, restarts=int(n == 4)),
                         restart_at=5 if n == 4 else None)
    write_experiment(root, "gpu/r1/broken", summary("broken", status="failed", error="RuntimeError: NCCL timeout",
                                                    throughput={}), ranks=1, steps=3)
    (root / "gpu" / "r1" / "timeline.json").write_text(json.dumps(timeline_doc()))
    return root / "gpu"


def timeline_doc(**extra: Any) -> dict[str, Any]:
    """A run's timeline.json (bench/results/timeline.py): 2 GPU nodes billed 100..1000 s, stepping 400..800 s."""
    spans = [("preflight", 0, 20), ("pulumi up", 20, 300), ("up: cluster", 30, 90), ("up: node groups", 100, 340),
             ("image pull and pod start", 340, 380), ("start-up to first step", 380, 400),
             ("training (first to last step)", 400, 800), ("teardown", 900, 1000), ("audit", 1000, 1030)]
    doc = {"version": 1, "stack": "gpu", "run_id": "r1", "started_at": "2026-11-24T00:00:00.000000Z",
           "gpu_nodes": 2, "gpu_hourly_usd": 48.96,
           "phases": [{"name": n, "start_s": a, "end_s": b, "source": "fixture"} for n, a, b in spans],
           "experiments": [{"name": "resnet50-1n", "pods_started_s": 380, "first_step_s": 400, "last_step_s": 600},
                           {"name": "resnet50-2n", "pods_started_s": 385, "first_step_s": 500, "last_step_s": 800}],
           "audit": {"clean": True, "lines": ["audit gpu: nothing left in us-west-2"]},
           "figures": {"minutes_to_first_step": 999}}
    doc.update(extra)
    return doc


@pytest.fixture(scope="module")
def repeats_tree(tmp_path_factory) -> Path:
    """results/<stack>/r2/: resnet50-rep run 3 times (repeats: 3) at 1000, 1100 and 1200 samples/s. Read only."""
    root = tmp_path_factory.mktemp("fake-repeats") / "results"
    for k, rate in ((1, 1000.0), (2, 1100.0), (3, 1200.0)):
        write_experiment(root, f"gpu/r2/resnet50-rep/repeat_{k}", summary("resnet50-rep", rate=rate))
    return root / "gpu"


@pytest.fixture(scope="session")
def real_run(tmp_path_factory) -> Path:
    """One real local run of dev's cifar10-elastic (torchrun + etcd, ~30 s); returns the results root."""
    root = tmp_path_factory.mktemp("real") / "results"
    done = subprocess.run([sys.executable, "-m", "bench", "run", "dev", "--local", "--experiment", "cifar10-elastic",
                           "--run-id", "t1", "--results-root", str(root)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return root
