"""Real runs on this machine: two torchrun agents over a loopback etcd, a node killed mid-run,
and the product's main command ``python -m bench run dev --local``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.local.plan import node_command, scale_experiment
from core.config.model import Experiment, LocalRun
from tests.support.processes import kill_tree, stop_all
from tests.workloads.conftest import ROOT, child_env, wait_for
from workloads.train.common.metrics import (
    last_step,
    metrics_dir,
    read_jsonl,
    read_rank_metrics,
)

pytestmark = pytest.mark.local_run


def start_nodes(exp, etcd, rdzv_id: str, nodes: int) -> list[subprocess.Popen]:
    procs = []
    for n in range(nodes):
        cmd = node_command(exp, n, python=sys.executable, endpoint=etcd.endpoint, rdzv_id=rdzv_id)
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
    return procs


def covered(lines: list[dict]) -> list[int]:
    """The steps the lines cover: a line covers its ``steps`` steps up to ``step``."""
    return [s for r in lines for s in range(r["step"] - r.get("steps", 1) + 1, r["step"] + 1)]


def rank_steps(results: Path, rank: int) -> list[int]:
    return covered(read_jsonl(metrics_dir(results) / f"rank-{rank}.jsonl"))


def test_two_agents_rendezvous_over_etcd_train_and_summarise(tmp_path, etcd):
    exp = scale_experiment(Experiment(name="pair", workload="resnet50", min_nodes=2, max_nodes=2, steps=12,
                                      checkpoint_every=5),
                           LocalRun(nodes=2, steps=12, batch_size=4, image_size=32, width_per_group=8),
                           results_dir=str(tmp_path / "pair"), data_dir=str(tmp_path / "data"))
    procs = start_nodes(exp, etcd, "test-pair", 2)
    try:
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        stop_all(procs)
    assert codes == [0, 0]
    results = tmp_path / "pair"
    assert rank_steps(results, 0) == list(range(1, 13))
    assert rank_steps(results, 1) == list(range(1, 13))
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["exit_code"] == 0
    assert summary["world_sizes"] == [2]
    assert summary["coverage"] == {"steps": 12, "duplicate_lines": 0, "missing_steps": []}
    assert summary["throughput"]["processes"] == 2
    assert summary["throughput"]["samples_per_s_total"] > 0
    assert set(summary["ranks"]) == {"0", "1"}
    assert summary["config"]["workload"] == "resnet50" and summary["config"]["batch_size"] == 4
    logs = {n: (results / "logs" / f"node-{n}.log").read_text() for n in (0, 1)}
    assert all("[workloads.train] rank" in text for text in logs.values()), logs
    assert "finished at step 12" in logs[0] + logs[1]
    # a fixed-size synthetic run is a throughput measurement: no checkpoint at all (launch.common.checkpoint_policy)
    assert exp.train.checkpoint_every == exp.train.checkpoint_minutes == 0 and not (results / "checkpoints").exists()


def test_killed_node_elastic_job_resumes_from_checkpoint_without_losing_steps(tmp_path, etcd):
    steps = 80
    exp = scale_experiment(Experiment(name="elastic", workload="resnet50", min_nodes=1, max_nodes=2, steps=steps,
                                      checkpoint_every=10, max_restarts=3),
                           LocalRun(nodes=2, steps=steps, batch_size=8, image_size=64, width_per_group=16),
                           results_dir=str(tmp_path / "elastic"), data_dir=str(tmp_path / "data"))
    assert (exp.min_nodes, exp.max_nodes, exp.train.checkpoint_every) == (1, 2, 10)
    results = tmp_path / "elastic"
    procs = start_nodes(exp, etcd, "test-elastic", 2)
    try:
        ckpt = results / "checkpoints" / "latest.pt"
        wait_for(lambda: ckpt.exists() and last_step(metrics_dir(results) / "rank-1.jsonl") >= 15, 90,
                 "a checkpoint and rank 1 past step 15", procs)
        killed_at = last_step(metrics_dir(results) / "rank-1.jsonl")
        assert killed_at < steps, "the run finished before the kill; make it longer"
        kill_tree(procs[1])  # node 1 disappears: launcher, torchrun agent and worker at once
        code = procs[0].wait(timeout=150)
    finally:
        stop_all(procs)
    assert code == 0
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "succeeded"
    assert summary["restarts"] >= 1
    assert summary["world_sizes"] == [1, 2]
    assert summary["coverage"] == {"steps": steps, "duplicate_lines": 0, "missing_steps": []}
    resume = summary["resumes"][-1]
    assert resume["world_size"] == 1 and resume["step"] >= 10 and resume["step"] % 10 == 0
    # rank 0 covers every step exactly once; after the resume point only the one-node world wrote
    by_rank = read_rank_metrics(results)
    assert covered(by_rank[0]) == list(range(1, steps + 1))
    assert all(r["world_size"] == 1 for r in by_rank[0] if r["step"] > resume["step"])
    assert all(r["world_size"] == 2 for r in by_rank[0] if r["step"] <= resume["step"])
    assert covered(by_rank[1]) == list(range(1, resume["step"] + 1))


def test_node_joining_an_elastic_job_restarts_it_from_the_checkpoint_with_a_bigger_world(tmp_path, etcd):
    steps = 60
    exp = scale_experiment(Experiment(name="grow", workload="resnet50", min_nodes=1, max_nodes=2, steps=steps,
                                      checkpoint_every=10),
                           LocalRun(nodes=2, steps=steps, batch_size=8, image_size=64, width_per_group=16),
                           results_dir=str(tmp_path / "grow"), data_dir=str(tmp_path / "data"))
    results = tmp_path / "grow"
    first = start_nodes(exp, etcd, "test-grow", 1)
    procs = list(first)
    try:
        wait_for(lambda: (results / "checkpoints" / "latest.pt").exists()
                 and last_step(metrics_dir(results) / "rank-0.jsonl") >= 12, 90, "one node past a checkpoint", procs)
        cmd = node_command(exp, 1, python=sys.executable, endpoint=etcd.endpoint, rdzv_id="test-grow")
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        codes = [p.wait(timeout=150) for p in procs]
    finally:
        stop_all(procs)
    assert codes == [0, 0]
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["world_sizes"] == [1, 2]
    assert summary["coverage"] == {"steps": steps, "duplicate_lines": 0, "missing_steps": []}
    resume = summary["resumes"][-1]
    assert resume["world_size"] == 2 and resume["step"] % 10 == 0 and resume["step"] >= 10
    by_rank = read_rank_metrics(results)
    assert covered(by_rank[0]) == list(range(1, steps + 1))
    assert covered(by_rank[1]) == list(range(resume["step"] + 1, steps + 1))
    # the bigger world trains at the bigger world's learning rate (linear scaling rule)
    assert resume["saved_world_size"] == 1 and resume["lr"] == 2 * exp.train.batch_size * 0.1 / 256


def test_bench_run_dev_local_end_to_end(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench", "run", "dev", "--local", "--run-id", "t",
                           "--results-root", str(tmp_path)], cwd=ROOT, env=child_env(2),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    # The dev stack runs its experiments one after another (execution: sequential).
    assert "2 experiment(s), sequential (stack setting)" in done.stdout
    assert "etcd 127.0.0.1:" in done.stdout
    assert "generated stand-in" in done.stdout
    assert "[resnet50-synthetic] step" in done.stdout  # progress lines
    run = tmp_path / "dev" / "t"
    for name in ("resnet50-synthetic", "cifar10-elastic"):
        summary = json.loads((run / name / "summary.json").read_text())
        assert summary["status"] == "succeeded", name
        assert summary["coverage"]["steps"] == 30
        # the figures a results loader reads: FLOPs, no MFU on a CPU (and why), percentiles, loop, device
        assert summary["flops_per_sample"] > 0 and summary["tflops_per_s"] > 0
        assert summary["mfu"] is None and "CPU" in summary["mfu_note"]
        tp = summary["throughput"]
        assert 0 < tp["step_time_p50_s"] <= tp["step_time_p95_s"] and tp["steady_steps"] == 25
        assert summary["loop_seconds"] > 0 and summary["data_wait_s"] >= 0
        assert summary["device"]["name"] == "cpu" and summary["device"]["torch"] and summary["nodes"] == 2
        assert summary["framework"] == "pytorch" and summary["gpus_per_node"] == 0
        assert "instance_type" in summary and summary["nccl_transport"] is None and summary["nccl_transport_note"]
        assert any(line.startswith(name) and "succeeded" in line for line in done.stdout.splitlines())
    evaluation = json.loads((run / "cifar10-elastic" / "eval" / "eval.json").read_text())
    assert 0 <= evaluation["accuracy"] <= 1 and len(evaluation["per_class"]) == 10


def test_without_etcd_on_path_the_local_run_uses_c10d(tmp_path):
    env = child_env(2)
    env["PATH"] = str(tmp_path / "empty-bin")  # no etcd (nor anything else) to be found
    done = subprocess.run([sys.executable, "-m", "bench", "run", "dev", "--local", "--experiment",
                           "resnet50-synthetic", "--run-id", "c", "--results-root", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "c10d rendezvous" in done.stdout and "etcd 127.0.0.1" not in done.stdout
    summary = json.loads((tmp_path / "dev" / "c" / "resnet50-synthetic" / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["world_sizes"] == [2]
    assert "--rdzv_backend=c10d" in summary["command"]  # spelled by core.contract.launch_command


def test_a_failing_experiment_is_reported_failed_with_its_log(tmp_path, capsys):
    from bench.local.experiment_run import ExperimentRun
    from bench.local.experiment_run import child_env as _child_env
    from bench.local.experiment_run import drive as _drive
    from bench.local.plan import with_rendezvous

    exp = with_rendezvous(scale_experiment(Experiment(name="bad", workload="cifar10", dataset="cifar10",
                                                      max_restarts=0), LocalRun(nodes=1, steps=3),
                                           results_dir=str(tmp_path / "bad"), data_dir=str(tmp_path / "no-data")),
                          etcd_available=False)
    run = ExperimentRun(exp, stack="t", run_id="r", etcd=None, env=_child_env(2, 1), timeout_s=120)
    _drive([run], every=1.0)
    row = run.row()
    assert row["status"] == "failed" and row["experiment"] == "bad"
    assert "no CIFAR-10" in (tmp_path / "bad" / "logs" / "node-0.log").read_text()
    err = capsys.readouterr().err
    assert "logs/node-0.log" in err and "FileNotFoundError: no CIFAR-10" in err
