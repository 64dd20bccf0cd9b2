"""Paddle for real on this machine: ``bench run paddle-ps --local`` (tests/bench/stacks/Pulumi.paddle-ps.yaml)
runs resnet50 (synthetic) and cifar10 (the generated stand-in), each with 2 pservers and 2 trainers of
``workloads.train.paddle.ps`` from the paddle venv, each wrapped by the results launcher, on loopback
with free ports; trainer 0's launcher writes summary.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.local.framework_venvs import missing_venv, venv_python
from workloads.train.common.metrics import metrics_dir, read_jsonl

ROOT = Path(__file__).resolve().parents[3]
STACK = ROOT / "tests" / "bench" / "stacks" / "Pulumi.paddle-ps.yaml"


def project(tmp: Path) -> Path:
    d = tmp / "project"
    d.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", d / "Pulumi.yaml")
    shutil.copy(STACK, d / STACK.name)
    return d


def run(tmp: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [e.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "bench", "run", "paddle-ps", "--local", "--run-id", "t",
                           "--project-dir", str(project(tmp)), "--results-root", str(tmp / "results"),
                           "--progress-every", "5", *extra], cwd=ROOT, env=e, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.local_run
def test_two_pservers_and_two_trainers_train_and_summarise(tmp_path):
    if venv_python("paddle") is None:
        pytest.skip(missing_venv("paddle"))
    done = run(tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name, workload in (("paddle-resnet50", "resnet50"), ("paddle-cifar10", "cifar10")):
        (results,) = (tmp_path / "results").glob(f"**/paddle-ps/t/{name}")  # core.contract.results_location's layout
        check_results(results, workload)


def check_results(results: Path, workload: str) -> None:
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["exit_code"] == 0, summary.get("log_tail")
    assert summary["framework"] == "paddle" and summary["node_id"] == "node-0"
    # the launcher read the trainer's arguments back from the paddle entry module's command
    assert summary["config"]["workload"] == workload and summary["config"]["batch_size"] == 8
    assert summary["world_sizes"] == [2] and summary["nodes"] == 2
    assert summary["launch"] == {"nodes": 2, "procs_per_node": 1}  # the Launched paddle's local entry passes
    assert summary["coverage"] == {"steps": 20, "duplicate_lines": 0, "missing_steps": []}
    tp = summary["throughput"]
    assert tp["processes"] == 2 and tp["samples_per_s_total"] > 0
    assert 0 < tp["step_time_p50_s"] <= tp["step_time_p95_s"]
    assert summary["device"]["name"] == "cpu" and summary["device"]["paddle"] == "3.0.0"
    assert set(summary["ranks"]) == {"0", "1"}
    for rank in (0, 1):  # the PyTorch trainer's metrics lines: every step once, each with its own time
        lines = read_jsonl(metrics_dir(results) / f"rank-{rank}.jsonl")
        steps = [s for r in lines for s in range(r["step"] - r["steps"] + 1, r["step"] + 1)]
        assert steps == list(range(1, 21))
        assert sum(len(r["step_times_s"]) for r in lines) == 20
        assert {r["world_size"] for r in lines} == {2} and all(r["loss"] > 0 for r in lines)
    if workload == "cifar10":  # 256 stand-in images, 16 per global step: the second epoch starts at step 17
        assert [r["epoch"] for r in lines][-1] == 1
    events = [e["event"] for e in read_jsonl(metrics_dir(results) / "events.jsonl")]
    assert events == ["start", "run_info", "startup", "end"]
    # the cluster's layout (workloads.job_manifests): pservers under pserver/, pod i's log logs/node-<i>.log
    logs = {str(p.relative_to(results)): p.read_text() for p in results.glob("**/node-*.log")}
    assert set(logs) == {"logs/node-0.log", "logs/node-1.log", "pserver/logs/node-0.log", "pserver/logs/node-1.log"}
    assert all(f"[paddle_ps] pserver {i}/2 serving" in logs[f"pserver/logs/node-{i}.log"]
               and f"pserver {i} stopped" in logs[f"pserver/logs/node-{i}.log"] for i in (0, 1))
    assert "finished at step 20 (trainers 2)" in logs["logs/node-0.log"]
    pserver = json.loads((results / "pserver" / "summary.json").read_text())
    assert pserver["status"] == "succeeded" and pserver["framework"] == "paddle"
    assert pserver["launch"] == {"nodes": 2, "procs_per_node": 1} and pserver["config"]["workload"] == workload


def test_a_missing_paddle_venv_is_one_line_naming_the_command_that_builds_it(tmp_path):
    env = dict(os.environ, EKSBENCH_VENVS=str(tmp_path / "no-venvs"))
    done = run(tmp_path, env=env)
    assert done.returncode == 2  # refused before anything starts (bench.errors.fail)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "bash .ci/setup-framework paddle" in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.local_run
def test_a_non_finite_loss_stops_every_trainer_at_the_same_step(tmp_path):
    """As the PyTorch and TensorFlow trainers do; GEO trainers step apart between exchanges, so they agree on it at
    each metrics step (a gloo all-reduce). The run then reads diverged, and the pservers stop with the trainers."""
    if venv_python("paddle") is None:
        pytest.skip(missing_venv("paddle"))
    text = STACK.read_text().replace("      epochs: 5\n", "      epochs: 5\n      args: [\"--lr=inf\"]\n")
    d = project(tmp_path)
    (d / STACK.name).write_text(text)
    done = subprocess.run([sys.executable, "-m", "bench", "run", "paddle-ps", "--local", "--run-id", "t",
                           "--experiment", "paddle-cifar10", "--project-dir", str(d), "--results-root",
                           str(tmp_path / "results"), "--progress-every", "5"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    (results,) = (tmp_path / "results").glob("**/paddle-ps/t/paddle-cifar10")
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "diverged" and done.returncode == 1, done.stdout[-2000:]
    last = {rank: read_jsonl(metrics_dir(results) / f"rank-{rank}.jsonl")[-1] for rank in (0, 1)}
    assert last[0]["step"] == last[1]["step"] < 20, last
    assert any(line.get("nonfinite_loss") for line in last.values())
    events = read_jsonl(metrics_dir(results) / "events.jsonl")
    assert [e["step"] for e in events if e["event"] == "diverged"] == [last[0]["step"]]
    assert json.loads((results / "pserver" / "summary.json").read_text())["status"] == "succeeded"
