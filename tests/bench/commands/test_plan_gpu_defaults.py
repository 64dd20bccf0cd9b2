"""The plan shows, per experiment, whether its GPU run compiles and which input path feeds it, with the reason
(core.config.gpu_defaults), in its text and in --json."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from bench.commands.plan import render
from program.offline import evaluate_config
from program.stack_files import ROOT

DEV = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]


def test_the_dev_plan_says_eager_and_synthetic_for_resnet_and_why():
    plan = evaluate_config("dev", DEV)
    rows = {r["experiment"]: r for r in plan.estimate["gpu_defaults"]}
    resnet, cifar = rows["resnet50-synthetic"], rows["cifar10-elastic"]
    assert (resnet["compile"], resnet["input_path"]) == (False, "synthetic")
    assert "does not pay back" in resnet["compile_reason"] and "no input cost" in resnet["input_reason"]
    assert (cifar["compile"], cifar["input_path"]) == (False, "cifar_memory")
    text = render(plan)
    assert "On its GPUs, each experiment" in text
    # the dev stack's p3: the V100's own rate (NVIDIA's 1,200 img/s in mixed precision), never the H100's 4,932
    assert ("  resnet50-synthetic: eager: ~1.8 min of steady steps eager at 1,200 img/s (NVIDIA's published "
            "one-V100") in text
    assert "input: synthetic tensors on the device: one random batch" in text


def test_a_long_run_compiles_and_an_image_folder_run_names_its_workers():
    long = {**DEV["eksbench:experiments"][0], "steps": 100_000}
    images = {**DEV["eksbench:experiments"][0], "name": "resnet50-imagenet", "dataset": "imagenet", "steps": 100_000}
    rows = evaluate_config("dev", {**DEV, "eksbench:experiments": [long, images]}).estimate["gpu_defaults"]
    assert rows[0]["compile"] is True and "pays back" in rows[0]["compile_reason"]
    # p3.16xlarge: 64 vCPUs for 8 GPUs, 75% requested, one core for the trainer
    assert (rows[1]["compile"], rows[1]["input_path"], rows[1]["workers"]) == (False, "dali", 5)
    assert "DALI decodes each image's random crop on the GPU" in rows[1]["input_reason"]
    assert "real images" in rows[1]["compile_reason"]
    pillow = evaluate_config("dev", {**DEV, "eksbench:experiments": [{**images, "input_path": "pillow"}]})
    (row,) = pillow.estimate["gpu_defaults"]
    assert row["input_path"] == "pillow" and "5 workers per process" in row["input_reason"]
    assert "input_path: pillow in the stack file" in row["input_reason"]


def test_the_json_plan_carries_the_same_rows():
    done = subprocess.run([sys.executable, "-m", "bench", "plan", "dev", "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)["estimate"]["gpu_defaults"]
    assert [(r["experiment"], r["compile"], r["input_path"]) for r in rows] == [
        ("resnet50-synthetic", False, "synthetic"), ("cifar10-elastic", False, "cifar_memory")]
    assert all(r["compile_reason"] and r["input_reason"] for r in rows)


def test_an_efa_experiment_whose_loader_forks_says_libfabric_keeps_off_huge_pages():
    """The pods set FI_EFA_USE_HUGE_PAGE=0 (workloads.job_manifests); the plan says why and that only EFA hardware
    shows the fault, for the Pillow path on a p4d group, not for DALI or synthetic data."""
    from tests.program.test_program import P5_FILLED

    first = P5_FILLED["eksbench:experiments"][0]
    pillow = {**first, "name": "resnet50-pillow", "dataset": "imagenet", "input_path": "pillow"}
    dali = {**first, "name": "resnet50-dali", "dataset": "imagenet", "input_path": "dali"}
    plan = evaluate_config("p5-fsx", {**P5_FILLED, "eksbench:experiments": [pillow, dali]})
    notes = {r["experiment"]: r["notes"] for r in plan.estimate["gpu_defaults"]}
    assert notes["resnet50-dali"] == [] and len(notes["resnet50-pillow"]) == 1
    assert "FI_EFA_USE_HUGE_PAGE=0" in notes["resnet50-pillow"][0] and "EFA hardware" in notes["resnet50-pillow"][0]
    assert "note: EFA without huge pages" in render(plan)
