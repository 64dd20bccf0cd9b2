"""Experiment keys the training side added (target_accuracy, checkpoint_minutes, compile_mode, input_path),
the region's training image, bf16 only where the GPUs have it, and what reaches the trainer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.catalog import pins
from core.config.fields import ConfigError
from core.config.model import Experiment
from core.config.shape import parse_stack_config
from tests.workloads.conftest import ROOT
from workloads.framework_support import check_experiment
from workloads.launch.common import CLUSTER_COLLECTIVE_TIMEOUT_S, checkpoint_policy, train_args_for

GROUP = {"name": "gpu", "instance_type": "p5.48xlarge"}


def parse(experiment: dict, *, region: str = "us-west-2", group: dict = GROUP):
    return parse_stack_config({"gpu_node_groups": [group], "experiments": [{"name": "x", **experiment}]},
                              project="eksbench", stack="t", region=region)


def test_new_experiment_keys_parse_and_reach_the_trainer():
    e = parse({"dataset": "cifar10", "workload": "cifar10", "target_accuracy": 0.9, "checkpoint_minutes": 5,
               "compile": True, "compile_mode": "max-autotune"}).experiments[0]
    assert (e.target_accuracy, e.checkpoint_minutes, e.compile_mode) == (0.9, 5.0, "max-autotune")
    args = train_args_for(e, _Paths(), instance_type="p5.48xlarge")
    assert args.target_accuracy == 0.9 and args.checkpoint_minutes == 5.0 and args.compile_mode == "max-autotune"
    assert args.workers == 17  # 192 vCPUs / 8 GPUs = 24, 75% of it less one
    assert args.collective_timeout == CLUSTER_COLLECTIVE_TIMEOUT_S == 300


class _Paths:
    datasets_dir = "/data/datasets"

    def experiment_results_dir(self, e):
        return f"/data/results/{e.name}"


@pytest.mark.parametrize("bad,needle", [({"target_accuracy": 1.5}, "experiments[0].target_accuracy=1.5"),
                                        ({"checkpoint_minutes": "often"}, "experiments[0].checkpoint_minutes"),
                                        ({"compile_mode": "fast"}, "experiments[0].compile_mode")])
def test_bad_values_of_the_new_keys_are_shape_errors(bad, needle):
    with pytest.raises(ConfigError) as err:
        parse(bad)
    assert any(needle in p for p in err.value.problems), err.value.problems


def test_synthetic_throughput_runs_do_not_checkpoint_inside_the_timed_loop():
    synthetic = Experiment(name="s", dataset="synthetic", checkpoint_minutes=10)
    assert checkpoint_policy(synthetic) == (0, 0.0)
    assert checkpoint_policy(Experiment(name="e", min_nodes=1, max_nodes=2)) == (0, 10.0)  # elastic: resumable
    assert checkpoint_policy(Experiment(name="i", dataset="imagenet", checkpoint_every=500)) == (500, 10.0)


def test_the_default_image_is_the_dlc_in_the_stacks_region():
    assert parse({}).experiments[0].image == pins.training_image("us-west-2")
    e = parse({}, region="eu-south-1").experiments[0]
    assert e.image == "692866216735.dkr.ecr.eu-south-1.amazonaws.com/pytorch-training:" + pins.DLC_TAG
    assert pins.training_image("cn-north-1").startswith("727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/")
    assert pins.is_training_image(e.image) and not pins.is_training_image("horovod/horovod:0.28.1")
    # a non-pytorch framework still needs its own image, whatever the region
    assert any("needs an image" in p for p in check_experiment(
        Experiment(name="t", framework="tensorflow", image=e.image)))


def bench_plan(stack_text: str, name: str) -> subprocess.CompletedProcess:
    target = ROOT / f"Pulumi.{name}.yaml"
    target.write_text(stack_text)
    try:
        return subprocess.run([sys.executable, "-m", "bench", "plan", name], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
    finally:
        target.unlink()


@pytest.mark.parametrize("itype,model", [("p3.16xlarge", "V100"), ("g4dn.12xlarge", "T4")])
def test_bf16_on_gpus_without_it_exits_2_naming_the_key(itype, model):
    r = bench_plan("config:\n  aws:region: us-west-2\n  eksbench:gpu_node_groups:\n"
                   f"    - {{name: gpu, instance_type: {itype}, max_size: 1}}\n"
                   "  eksbench:experiments:\n    - {name: bf, precision: bf16}\n", "bf16-cli-test")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f'experiments[0].precision="bf16": {model} GPUs ({itype}' in r.stderr and "amp-fp16" in r.stderr
    assert "Traceback" not in r.stderr


def test_input_path_reaches_the_trainer_and_is_refused_where_nothing_reads_jpegs():
    e = parse({"dataset": "imagenet", "input_path": "nvjpeg"}).experiments[0]
    assert check_experiment(e) == [] and train_args_for(e, _Paths()).input_path == "nvjpeg"
    assert train_args_for(parse({"dataset": "imagenet"}).experiments[0], _Paths()).input_path == "dali"
    for keys in ({"input_path": "dali"},  # synthetic data
                 {"workload": "cifar10", "dataset": "cifar10", "input_path": "pillow"}):
        (problem,) = check_experiment(parse(keys).experiments[0])
        assert problem.startswith(f'input_path="{keys["input_path"]}"') and 'e.g. input_path: "auto"' in problem
