"""The TensorFlow trainer in the process shapes the cluster runs it: one worker driving several devices (a pod's
GPUs; here logical CPU devices, ``EKSBENCH_CPU_DEVICES``), and several workers, with one replica's gradients
overflowing float16. Each runs in TensorFlow's own venv (``.ci/setup-framework tensorflow``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from bench.local.framework_venvs import missing_venv, venv_python
from core.contract.train_args import parse_train_args
from workloads.train.common.metrics import read_jsonl, read_rank_metrics
from workloads.train.common.schedule import lr_at

ROOT = Path(__file__).resolve().parents[3]
CHECKS = ROOT / "tests" / "support" / "tf_step_checks.py"

pytestmark = pytest.mark.local_run


def tf_python() -> Path:
    python = venv_python("tensorflow")
    assert python is not None, missing_venv("tensorflow")
    return python


def tf_env(**extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
            **extra}


def run_all(argvs: list[list[str]], envs: list[dict[str, str]], timeout: float) -> list[subprocess.CompletedProcess]:
    """Start every process, wait for all; past ``timeout`` each is killed (a hung collective ignores SIGTERM)."""
    procs = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for argv, env in zip(argvs, envs)]
    done = []
    for p, argv in zip(procs, argvs):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, signal.SIGKILL)
            pytest.fail(f"{' '.join(map(str, argv))} still running after {timeout} s: a hung collective")
        done.append(subprocess.CompletedProcess(argv, p.returncode, out, err))
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tf_configs(n: int) -> list[str]:
    workers = [f"127.0.0.1:{free_port()}" for _ in range(n)]
    return [json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}) for i in range(n)]


def last_json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- one worker, two devices --------------------------------------------------------------------------------------


TRAIN = ["--workload=resnet50", "--dataset=synthetic", "--image-size=32", "--width-per-group=2", "--warmup-steps=1",
         "--log-every=1", "--precision=fp32"]


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory) -> Path:
    """One worker mirroring over two logical CPU devices, at a global batch (2 x 520) above the large-batch
    warm-up's threshold (1024), so the learning rate changes every step."""
    results = tmp_path_factory.mktemp("tf2") / "r"
    (done,) = run_all([[str(tf_python()), "-m", "workloads.train.tensorflow", *TRAIN, "--batch-size=520", "--steps=3",
                        f"--results-dir={results}"]], [tf_env(EKSBENCH_CPU_DEVICES="2")], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return results


def test_one_worker_trains_on_two_devices(two_devices):
    """Keras 3 failed at step 1 here (an optimizer first built inside the step under a multi-replica strategy:
    'You must feed a value for placeholder tensor'); the trainer now builds it in the strategy's scope."""
    lines = read_rank_metrics(two_devices)[0]
    assert [r["step"] for r in lines] == [1, 2, 3]
    assert all(r["samples"] == 2 * 520 and r["loss"] is not None for r in lines)
    info = [e for e in read_jsonl(two_devices / "metrics" / "events.jsonl") if e["event"] == "run_info"][-1]
    assert info["replicas"] == 2 and info["devices_per_process"] == 2


def test_the_learning_rate_is_the_pytorch_schedule_with_its_warm_up(two_devices):
    """schedule.lr_at for the replicas in the run: linear scaling, and above a global batch of 1024 Goyal et al.'s
    warm-up from the rule's rate at 256 (TensorFlow once started at the full 8 x 0.1 with no warm-up)."""
    args = parse_train_args([*TRAIN, "--batch-size=520", "--steps=3"])
    lines = read_rank_metrics(two_devices)[0]
    expected = [lr_at(args, 2, step) for step in range(3)]
    assert [r["lr"] for r in lines] == pytest.approx(expected, rel=1e-6)
    assert expected[0] == pytest.approx(0.1) and expected[0] < expected[1] < expected[2] < 0.1 * 1040 / 256


def test_weight_decay_is_pytorchs_coupled_l2_across_replicas():
    """Two steps on a layer whose gradient is zero: PyTorch SGD (v = 0.9 v + wd w; w -= lr v), not Keras' decoupled
    decay (w -= lr wd w, momentum untouched), and not counted once per replica."""
    import numpy as np

    (done,) = run_all([[str(tf_python()), str(CHECKS), "--devices", "2", "--check", "l2"]], [tf_env()], timeout=300)
    out = last_json(done)
    w0, lr, wd = np.array(out["before"]), 0.1, 0.1
    v = wd * w0
    w1 = w0 - lr * v
    v = 0.9 * v + wd * w1
    assert out["replicas"] == 2
    assert np.allclose(out["after"], w1 - lr * v, rtol=0, atol=1e-6)
    assert not np.allclose(out["after"], w1 - lr * wd * w1, rtol=0, atol=1e-6)  # decoupled would give this


# --- amp-fp16: one replica overflows --------------------------------------------------------------------------------


def check_overflow(history: list[dict]) -> None:
    """Step 2 overflowed on one replica only: skipped everywhere, the scale halved once, and no more."""
    assert [h["scale"] for h in history] == [32768.0, 16384.0, 16384.0, 16384.0]
    assert [h["skipped"] for h in history] == [0, 1, 1, 1]


def test_two_replicas_of_one_worker_skip_a_step_when_one_of_them_overflows():
    """Keras' LossScaleOptimizer took the first replica's verdict: the weights became -inf and the scale stayed."""
    (done,) = run_all([[str(tf_python()), str(CHECKS), "--devices", "2", "--overflow-replica", "1"]], [tf_env()],
                      timeout=300)
    out = last_json(done)
    assert out["replicas"] == 2 and out["finite"]
    check_overflow(out["history"])


def test_two_workers_finish_when_one_of_them_overflows():
    """With Keras' LossScaleOptimizer both workers hung at the overflowing step (over 11 minutes here): one took
    the apply branch and its all-reduce, the other skipped it."""
    argv = [str(tf_python()), str(CHECKS), "--overflow-worker", "1"]
    done = run_all([argv, argv], [tf_env(TF_CONFIG=c) for c in tf_configs(2)], timeout=240)
    outs = [last_json(d) for d in done]
    for out in outs:
        assert out["replicas"] == 2 and out["finite"]
        check_overflow(out["history"])
    assert outs[0]["checksum"] == outs[1]["checksum"]


# --- a diverging run stops every worker -----------------------------------------------------------------------------


def test_a_non_finite_loss_stops_every_worker_at_the_same_step(tmp_path):
    """As the PyTorch trainer does: the loss each step returns is the global one, so every worker sees it."""
    argv = [str(tf_python()), "-m", "workloads.train.tensorflow", *TRAIN, "--batch-size=4", "--steps=40", "--lr=1e12",
            f"--results-dir={tmp_path / 'r'}"]
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = run_all([argv, argv], [tf_env(TF_CONFIG=c, TMPDIR=str(scratch)) for c in tf_configs(2)], timeout=600)
    assert [d.returncode for d in done] == [0, 0], done[0].stderr[-2000:]
    assert not list(scratch.iterdir())  # AutoGraph's files went with the workers, though they leave with os._exit
    by_rank = read_rank_metrics(tmp_path / "r")
    last = {rank: lines[-1] for rank, lines in by_rank.items()}
    assert last[0]["step"] == last[1]["step"] < 40, last
    assert all(line["nonfinite_loss"] and line["loss"] is None for line in last.values())
    events = read_jsonl(tmp_path / "r" / "metrics" / "events.jsonl")
    diverged = [e for e in events if e["event"] == "diverged"]
    assert diverged and diverged[0]["step"] == last[0]["step"]
    assert [e for e in events if e["event"] == "end"][-1]["diverged"] is True


# --- bench run --local: a one-node TensorFlow experiment in the cluster's shape ---------------------------------------


def test_bench_run_local_trains_a_one_node_experiment_on_two_devices_and_counts_per_device(tmp_path):
    """tests/stacks/Pulumi.frameworks.yaml's tf-replicas: one worker of a 4-GPU node on the cluster, here two logical
    CPU devices (local.procs_per_node: 2); the summary's per-device rate is the worker's over its two devices."""
    import shutil
    import sys

    project = tmp_path / "project"
    project.mkdir()
    for path in (ROOT / "Pulumi.yaml", ROOT / "tests" / "stacks" / "Pulumi.frameworks.yaml"):
        shutil.copy(path, project / path.name)
    done = subprocess.run([sys.executable, "-m", "bench", "run", "frameworks", "--local", "--experiment", "tf-replicas",
                           "--run-id", "r", "--project-dir", str(project), "--results-root", str(tmp_path / "res"),
                           "--progress-every", "30"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "nodes 1 x 1 proc x 2 devices" in done.stdout
    s = json.loads((tmp_path / "res" / "frameworks" / "r" / "tf-replicas" / "summary.json").read_text())
    tp = s["throughput"]
    assert s["status"] == "succeeded" and tp["devices_per_process"] == 2
    assert tp["samples_per_s_per_device"] == pytest.approx(tp["samples_per_s_per_process"] / 2, abs=1e-3)
