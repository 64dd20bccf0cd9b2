"""The GPU defaults: whether an experiment compiles (an explicit ``compile`` wins; unset, the rule decides from
the measured gain and an estimated compile time) and which input path feeds it, each with its reason."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from core.catalog.gpu_rates import COMPILE_GAINS
from core.config.gpu_defaults import compile_choice, input_path, steady_samples_per_gpu
from core.config.model import Experiment
from core.config.shape import parse_stack_config

DEV_RESNET = Experiment(name="resnet50-synthetic", max_nodes=2, min_nodes=2, gpus_per_node=8, batch_size=256,
                        steps=500)
GAIN = COMPILE_GAINS["resnet50"]["H100"]
ROOT = Path(__file__).resolve().parents[2]


def steps_for(steady_s: float, batch: int = 256) -> int:
    """The steps whose steady time (eager, at the catalog's rate) is ``steady_s``."""
    return round(steady_s * GAIN.eager_per_s / batch)


def test_the_stack_files_compile_wins_on_any_device_and_in_any_length():
    for value in (True, False):
        for gpu in (True, False):
            c = compile_choice(replace(DEV_RESNET, compile=value, steps=10**6), gpu=gpu)
            assert c.value is value and "in the stack file" in c.reason


def test_a_cpu_run_never_compiles_unless_asked():
    """The README's first command (bench run --local) keeps its speed: Inductor takes minutes on a CPU."""
    c = compile_choice(replace(DEV_RESNET, steps=10**6), gpu=False)
    assert c.value is False and "CPU" in c.reason


def test_a_gpu_run_compiles_where_the_time_it_saves_exceeds_the_compile_time():
    # the dev stack's 500 steps of 256: ~26 s steady on an H100, compiling would save ~4 s of it
    dev = compile_choice(DEV_RESNET, gpu=True)
    assert dev.value is False and "does not pay back" in dev.reason and "~90 s to compile" in dev.reason
    assert "owed" in dev.reason  # the compile time is an estimate until a GPU measures it
    k = GAIN.payback_factor
    assert k == pytest.approx(5912 / (5912 - 4932))  # about 6: the H100's 4,932 eager and 5,912 compiled img/s
    below = compile_choice(replace(DEV_RESNET, steps=steps_for(0.95 * k * GAIN.compile_s)), gpu=True)
    above = compile_choice(replace(DEV_RESNET, steps=steps_for(1.05 * k * GAIN.compile_s)), gpu=True)
    assert below.value is False and above.value is True and "pays back" in above.reason


def test_what_compiling_cannot_speed_up_stays_eager():
    cases = {
        "real images": replace(DEV_RESNET, dataset="imagenet", steps=10**6),
        "no measured gain": replace(DEV_RESNET, workload="cifar10", dataset="cifar10", steps=10**6),
        "shapes change": replace(DEV_RESNET, workload="maskrcnn", steps=10**6),
        "no model": replace(DEV_RESNET, workload="allreduce", steps=10**6),
        "not torch": replace(DEV_RESNET, framework="tensorflow", steps=10**6),
    }
    reasons = {name: compile_choice(e, gpu=True) for name, e in cases.items()}
    assert all(c.value is False for c in reasons.values())
    assert "1,852 img/s" in reasons["real images"].reason and "1,530" in reasons["real images"].reason
    assert "dali is not measured yet" in reasons["real images"].reason  # the default path on a GPU
    assert "not measured" not in compile_choice(replace(DEV_RESNET, dataset="imagenet", input_path="pillow"),
                                                gpu=True).reason
    assert "cifar10" in reasons["no measured gain"].reason and "recompile" in reasons["shapes change"].reason
    assert "tensorflow" in reasons["not torch"].reason


def test_an_epoch_runs_samples_are_its_epochs_shared_by_the_world():
    e = replace(DEV_RESNET, epochs=2)
    assert steady_samples_per_gpu(e) == 2 * 1_281_167 / 16
    assert steady_samples_per_gpu(DEV_RESNET) == 500 * 256


def test_each_input_path_is_named_with_its_reason():
    def path(e, gpu=True, workers=8):
        return input_path(e, gpu=gpu, workers=workers).value

    imagenet = replace(DEV_RESNET, dataset="imagenet")
    assert path(DEV_RESNET) == "synthetic"
    assert path(imagenet) == "dali" and path(imagenet, gpu=False) == "pillow"  # auto: DALI on a GPU only
    for chosen in ("pillow", "nvjpeg", "dali"):  # the stack file's choice wins on either device
        assert path(replace(imagenet, input_path=chosen)) == chosen
        assert path(replace(imagenet, input_path=chosen), gpu=False) == chosen
    assert path(replace(DEV_RESNET, workload="cifar10", dataset="cifar10")) == "cifar_memory"
    assert path(replace(DEV_RESNET, workload="maskrcnn", dataset="coco2017")) == "pillow"  # its own loader
    assert path(replace(DEV_RESNET, workload="allreduce")) == "none"
    assert path(replace(DEV_RESNET, framework="tensorflow", dataset="imagenet")) == "framework"
    dali = input_path(imagenet, gpu=True, workers=17)
    assert "GPU default" in dali.reason and "owed a measurement" in dali.reason
    pillow = input_path(replace(imagenet, input_path="pillow"), gpu=True, workers=17)
    assert "17 workers per process" in pillow.reason and "1,852 img/s" in pillow.reason
    assert "in the stack file" in pillow.reason
    cpu = input_path(replace(imagenet, input_path="nvjpeg"), gpu=False, workers=0)
    assert "on the CPU" in cpu.reason and "The training process" in cpu.reason


def test_compile_is_tri_state_in_a_stack_file():
    def parsed(**keys):
        raw = {"gpu_node_groups": [{"name": "p3", "instance_type": "p3.16xlarge"}],
               "results": {"bucket": "my-results-bucket"},
               "experiments": [{"name": "a", **keys}]}
        return parse_stack_config(raw, project="eksbench", stack="s", region="us-west-2").experiments[0].compile

    assert (parsed(), parsed(compile=True), parsed(compile=False), parsed(compile="false")) == (None, True, False,
                                                                                                 False)


def test_the_rule_imports_no_torch():
    code = "import sys, core.config.gpu_defaults; assert 'torch' not in sys.modules, 'torch imported'"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_compile_estimate_uses_the_stacks_own_gpus_rate_and_names_the_gpu_its_gain_came_from(monkeypatch):
    """A V100 stack (dev's p3.16xlarge): its steady time at the V100's own rate, NVIDIA's published 1,200 img/s in
    mixed precision, never the H100's 4,932; only the compile gain (a ratio) is the H100's, and the reason says so. A
    p5 stack: its own H100's figures; a V100 figure, once measured, decides a V100 stack's run."""
    from core.catalog import gpu_rates

    long = replace(DEV_RESNET, steps=steps_for(1.5 * GAIN.payback_factor * GAIN.compile_s))
    v100 = compile_choice(long, gpu=True, instance_type="p3.16xlarge")
    assert "eager at 1,200 img/s (NVIDIA's published one-V100 figure, mixed precision" in v100.reason
    assert "4,932" not in v100.reason and "compile gain measured on H100; none measured on V100" in v100.reason
    assert v100.value  # 4 x longer at the V100's rate than at the H100's: compiling pays back all the more
    h100 = compile_choice(long, gpu=True, instance_type="p5.48xlarge")
    assert "4,932 img/s (measured on H100)" in h100.reason and "none measured" not in h100.reason
    slow = replace(GAIN, gpu="V100", eager_per_s=1200.0, compiled_per_s=1210.0)  # a gain too small to repay
    monkeypatch.setitem(gpu_rates.COMPILE_GAINS, "resnet50", {"H100": GAIN, "V100": slow})
    own = compile_choice(long, gpu=True, instance_type="p3.16xlarge")
    assert "1,200 img/s (measured on V100)" in own.reason and own.value is False
    assert compile_choice(long, gpu=True, instance_type="p5.48xlarge").value is True


def test_a_gpu_with_no_rate_of_its_own_stays_eager_and_says_which_gpus_have_one():
    """An L40S (g6e) has no ResNet-50 rate, measured or published, and an A100 none in bf16 (NVIDIA's table has mixed
    precision and TF32): no other GPU's rate stands in; eager, naming what exists."""
    long = replace(DEV_RESNET, steps=10**6, precision="bf16")
    for instance_type, gpu in (("g6e.48xlarge", "L40S"), ("p4d.24xlarge", "A100")):
        c = compile_choice(long, gpu=True, instance_type=instance_type)
        assert c.value is False and f"no resnet50 rate on {gpu} in bf16" in c.reason, c.reason
        assert "measured on H100; NVIDIA publishes fp32 and amp-fp16 on A100, V100" in c.reason
    a100 = compile_choice(replace(long, precision="amp-fp16"), gpu=True, instance_type="p4d.24xlarge")
    assert "eager at 2,470 img/s (NVIDIA's published one-A100 figure" in a100.reason and a100.value is True


def test_the_plan_of_a_v100_stack_says_whose_figures_its_compile_estimate_uses():
    done = subprocess.run([sys.executable, "-m", "bench", "plan", "dev"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "eager at 1,200 img/s (NVIDIA's published one-V100 figure" in done.stdout
    assert "compile gain measured on H100; none measured on V100" in done.stdout and "4,932" not in done.stdout
