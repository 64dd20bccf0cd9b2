"""On a CUDA GPU, the launcher's sampler (workloads/train/harness/telemetry.py) reads what a short training did, and
its figures are plausible: utilisation above zero while the steps ran, energy equal to the sampled mean power times
the time sampled (and to NVML's own energy counter over the run) within 10%, memory in use below the total.

The training runs as the pods run it: the launcher, with its sampler thread, wraps ``python -m
workloads.train.pytorch`` in a child process, so NVML is read outside the trainer's CUDA context. Elsewhere (no
CUDA device, or no pynvml) the test skips, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from core.contract.launch_command import launched_trainer, launcher_argv, trainer_argv  # noqa: E402
from core.contract.train_args import TrainArgs  # noqa: E402
from workloads.train.common.metrics import read_rank_metrics  # noqa: E402
from workloads.train.harness.telemetry_summary import file_lines, steady_window  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU suite needs one")]
ROOT = Path(__file__).resolve().parents[2]
TRAINING = TrainArgs(workload="resnet50", dataset="synthetic", batch_size=128, image_size=224, steps=400,
                     precision="amp-fp16", channels_last=True, warmup_steps=20, log_every=10, checkpoint_every=0)


def nvml_energy_j(pynvml) -> float | None:
    """GPU 0's energy counter since the driver loaded (``nvmlDeviceGetTotalEnergyConsumption``, mJ; Volta and later)."""
    try:
        return pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(0)) / 1000
    except pynvml.NVMLError:
        return None


def train_under_the_launcher(results: Path) -> tuple[int, float]:
    args = TrainArgs(**{**TRAINING.__dict__, "results_dir": str(results)})
    command = [*launcher_argv(python=sys.executable, results_dir=str(results), node_id="node-0", summary="always",
                              launched=launched_trainer(nodes=1, procs_per_node=1, args=args)),
               "--", sys.executable, *trainer_argv(args)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "0"}
    env.pop("MASTER_ADDR", None)
    started = time.time()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:]
    return done.returncode, time.time() - started


def test_the_sampler_reads_a_short_training_plausibly(tmp_path):
    pynvml = pytest.importorskip("pynvml", reason="pynvml (nvidia-ml-py) is not installed")
    pynvml.nvmlInit()
    try:
        before = nvml_energy_j(pynvml)
        _, elapsed = train_under_the_launcher(tmp_path / "r")
        after = nvml_energy_j(pynvml)
    finally:
        pynvml.nvmlShutdown()
    block = json.loads((tmp_path / "r" / "summary.json").read_text())["telemetry"]
    lines = list(file_lines(tmp_path / "r" / "telemetry" / "node-0.jsonl"))
    assert block["source"] == "nvml" and block["gpus"] >= 1 and block["samples"] == len(lines) >= 5, block

    window = steady_window(read_rank_metrics(tmp_path / "r"))
    training = [line["gpus"][0]["util_pct"] for line in lines if window and window[0] <= line["t"] <= window[1]]
    assert training and max(training) > 0 and block["util_mean_pct"] > 0, (training, block)

    power = [sum(g["power_w"] for g in line["gpus"]) for line in lines]
    mean_power = sum(power) / len(power)
    assert block["energy_j"] == pytest.approx(mean_power * block["seconds"], rel=0.10), (block, mean_power)
    if before is not None and after is not None:  # NVML's own counter, over the launcher's whole life
        gpus0 = lines[-1]["gpus"][0]["energy_j"]
        assert gpus0 / block["seconds"] == pytest.approx((after - before) / elapsed, rel=0.10), (gpus0, after - before)

    assert 0 < block["memory_peak_bytes"] < block["memory_total_bytes"], block
    print(f"telemetry: {json.dumps(block)}")
