"""``bench run --local`` of a TensorFlow experiment, for real: two MultiWorkerMirroredStrategy workers with
the TF_CONFIG the cluster gets (on loopback), started from TensorFlow's own venv (``.ci/setup-framework
tensorflow``), each wrapped by the results launcher; the summary and metrics as PyTorch's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.local.framework_venvs import missing_venv, venv_python
from tests.support.image_folder import write_image_folder
from workloads.train.common.metrics import read_jsonl, read_rank_metrics

ROOT = Path(__file__).resolve().parents[3]
STACK = ROOT / "tests" / "stacks" / "Pulumi.frameworks.yaml"
# The keys of a PyTorch metrics line (workloads/train/pytorch/run_metrics.py): the launcher's figures read them.
LINE_KEYS = {"step", "epoch", "loss", "steps", "samples", "step_time_s", "samples_per_s", "step_times_s",
             "data_wait_s", "peak_memory_gib", "lr", "wall_time", "world_size", "rank", "restart", "warmup"}

pytestmark = [pytest.mark.local_run, pytest.mark.cpu_capability]  # amp-fp16 trains in this CPU's choice


def torch_flops(model, image_size: int) -> float:
    """3 x PyTorch's count of one forward pass (FlopCounterMode): the training FLOPs by TensorFlow's convention."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model.eval()(torch.randn(1, 3, image_size, image_size))
    return 3 * counter.get_total_flops()


@pytest.fixture(scope="module")
def tf_run(tmp_path_factory):
    assert venv_python("tensorflow") is not None, missing_venv("tensorflow")
    tmp = tmp_path_factory.mktemp("tf")
    project = tmp / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copy(STACK, project / STACK.name)
    done = subprocess.run([sys.executable, "-m", "bench", "run", "frameworks", "--local", "--experiment", "tf-resnet50",
                           "--run-id", "t", "--project-dir", str(project), "--results-root", str(tmp / "results"),
                           "--progress-every", "30"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    return done, tmp / "results" / "frameworks" / "t" / "tf-resnet50"


def test_two_tensorflow_workers_train_and_the_launcher_summarises(tf_run, cpu_mixed_precision):
    done, results = tf_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    s = json.loads((results / "summary.json").read_text())
    assert s["status"] == "succeeded" and s["framework"] == "tensorflow" and s["exit_code"] == 0
    assert s["launch"] == {"nodes": 2, "procs_per_node": 1}  # the Launched the local entry passes
    assert s["nodes"] == 2 and s["world_sizes"] == [2] and "Keras" in s["model"]
    # the stack's amp-fp16 becomes bf16 on a CPU with bf16 instructions, else fp32 (workloads.train.common.cpu_choice)
    assert s["config"]["workload"] == "resnet50" and s["config"]["precision"] == cpu_mixed_precision
    assert s["precision"] == cpu_mixed_precision
    assert s["coverage"] == {"steps": 12, "duplicate_lines": 0, "missing_steps": []}
    tp = s["throughput"]
    assert tp["samples_per_s_total"] > 0 and tp["processes"] == 2
    assert 0 < tp["step_time_p50_s"] <= tp["step_time_p95_s"]
    assert s["device"]["tensorflow"] == "2.21.0" and s["device"]["name"] == "cpu"
    import torchvision

    assert s["flops_per_sample"] == torch_flops(torchvision.models.resnet50(weights=None, width_per_group=16), 64)
    assert (results / "logs" / "node-0.log").is_file() and (results / "logs" / "node-1.log").is_file()


def test_each_worker_writes_pytorch_shaped_metrics_lines(tf_run):
    _, results = tf_run
    by_rank = read_rank_metrics(results)
    assert sorted(by_rank) == [0, 1]
    for rank, lines in by_rank.items():
        assert lines and all(set(line) == LINE_KEYS for line in lines), lines[0]
        assert {line["rank"] for line in lines} == {rank} and lines[-1]["step"] == 12
        assert all(len(line["step_times_s"]) == line["steps"] and line["samples"] == 8 * line["steps"]
                   for line in lines)
    events = [e["event"] for e in read_jsonl(results / "metrics" / "events.jsonl")]
    assert events[:2] == ["start", "run_info"] and "startup" in events and events[-1] == "end"


def test_the_keras_models_have_the_pytorch_models_layers():
    """Their forward FLOPs, counted by each framework's own counter, are equal (resnet50 narrowed as the local
    run narrows it, and the CIFAR network)."""
    import torchvision

    from workloads.train.pytorch.models import cifar_resnet

    code = ("import json, keras, tensorflow as tf\n"
            "from workloads.train.tensorflow.trainer import flops_per_sample\n"
            "from workloads.train.tensorflow.models import MODELS\n"
            "models = [(MODELS[w](keras, image_size=s, num_classes=n, width_per_group=16), s)"
            " for w, s, n in (('resnet50', 64, 1000), ('cifar10', 32, 10))]\n"
            "print(json.dumps([flops_per_sample(tf, m, s)[0] for m, s in models]))")
    python = venv_python("tensorflow")
    assert python is not None, missing_venv("tensorflow")
    done = subprocess.run([str(python), "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    tf_resnet, tf_cifar = json.loads(done.stdout.splitlines()[-1])
    assert tf_resnet == torch_flops(torchvision.models.resnet50(weights=None, width_per_group=16), 64)
    assert tf_cifar == torch_flops(cifar_resnet(width=16), 32)


def tf_train(tmp_path, *args: str) -> dict[int, list[dict]]:
    """One TensorFlow worker (no TF_CONFIG: a one-worker strategy), from TensorFlow's venv."""
    python = venv_python("tensorflow")
    assert python is not None, missing_venv("tensorflow")
    done = subprocess.run([str(python), "-m", "workloads.train.tensorflow.trainer", "--precision=fp32", "--warmup-steps=1",
                           "--log-every=1", f"--results-dir={tmp_path / 'r'}", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                                       "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-3000:]
    return read_rank_metrics(tmp_path / "r")


def test_tensorflow_reads_an_image_folder(tmp_path):
    write_image_folder(tmp_path / "data")  # 2 classes x 4 images
    lines = tf_train(tmp_path, "--workload=resnet50", "--dataset=tiny", f"--data-dir={tmp_path / 'data'}",
                     "--batch-size=4", "--steps=3", "--image-size=32", "--width-per-group=4")[0]
    assert [(r["step"], r["epoch"]) for r in lines] == [(1, 0), (2, 0), (3, 1)]  # 8 images, batch 4


def test_tensorflow_trains_cifar10_by_epochs(tmp_path):
    from workloads.train.common.cifar import write_standin

    write_standin(tmp_path / "data", train=64, test=40)
    lines = tf_train(tmp_path, "--workload=cifar10", "--dataset=cifar10", f"--data-dir={tmp_path / 'data'}",
                     "--batch-size=16", "--epochs=2", "--steps=1", "--image-size=32", "--width-per-group=4")[0]
    assert [r["step"] for r in lines] == list(range(1, 9))  # 2 epochs x 64/16 steps; --steps ignored
    assert [r["epoch"] for r in lines] == [0, 0, 0, 0, 1, 1, 1, 1]
