"""On a CUDA GPU, a minute of training under the launcher measures its energy twice: by NVML's energy counter (the
summary's figure, ``energy_source`` "nvml_energy_counter" on Volta and newer) and by the integral of the sampled power
(each line's ``energy_j``). ``bash .ci/gpu energy`` runs it and prints both; elsewhere it skips, saying why.

The two agree within 10% where the power reading is a one-second average (later Ampere and newer); where it is
instantaneous (V100, A100), 1 Hz samples can lock to the steps' cycle, which is why the counter is the figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.contract.launch_command import launched_trainer, launcher_argv, trainer_argv
from core.contract.train_args import TrainArgs
from workloads.train.harness.telemetry_summary import file_lines


def nvml_gpus() -> int:
    """The GPUs NVML sees (0 without pynvml or a driver): the test asks NVML, as the sampler does, not a framework."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, DriverNotLoaded: no GPU here
        return 0


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not nvml_gpus(), reason="no CUDA device: the energy comparison "
                                                  "needs one (pynvml and a GPU its driver sees)")]
ROOT = Path(__file__).resolve().parents[4]
# ResNet-50 at batch 128 in amp-fp16: about a minute on an H100 (two on an A100); GPU_ENERGY_STEPS sets another length
STEPS = int(os.environ.get("GPU_ENERGY_STEPS", "1500"))


def test_the_energy_counter_and_the_power_integral_over_a_minute_of_training(tmp_path):
    results = tmp_path / "r"
    args = TrainArgs(workload="resnet50", dataset="synthetic", batch_size=128, image_size=224, steps=STEPS,
                     precision="amp-fp16", channels_last=True, warmup_steps=20, log_every=50, checkpoint_every=0,
                     results_dir=str(results))
    command = [*launcher_argv(python=sys.executable, results_dir=str(results), node_id="node-0", summary="always",
                              launched=launched_trainer(nodes=1, procs_per_node=1, args=args)),
               "--", sys.executable, *trainer_argv(args)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "0"}
    env.pop("MASTER_ADDR", None)
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout[-3000:]

    block = json.loads((results / "summary.json").read_text())["telemetry"]
    last = {}  # each GPU's last line: both running totals
    for line in file_lines(results / "telemetry" / "node-0.jsonl"):
        last.update({g["index"]: g for g in line.get("gpus", ())})
    counter = sum(g.get("energy_counter_j", 0.0) for g in last.values())
    integral = sum(g["energy_j"] for g in last.values())
    seconds = max(block["seconds"] or 0.0, 1e-9)
    print(f"\nenergy over {block['seconds']} s of sampling, {len(last)} GPU(s): counter {counter:.1f} J "
          f"({counter / seconds:.1f} W), power integral {integral:.1f} J ({integral / seconds:.1f} W), "
          f"integral/counter {integral / max(counter, 1e-9):.4f}; "
          f"summary: {block['energy_source']} {block['energy_j']} J")
    assert block["seconds"] >= 30, block  # a minute's training, less the start
    assert block["energy_source"] == "nvml_energy_counter", block  # every GPU the catalog has is Volta or newer
    assert block["energy_j"] == pytest.approx(counter, abs=0.01), (block, counter)
    assert integral == pytest.approx(counter, rel=0.10), (integral, counter)
