"""``bench run --local`` of an experiment that diverges (``args: ["--lr=1e12"]``) for real: two torchrun agents
through etcd, the trainer stops at the non-finite loss, the launcher records ``diverged``, bench exits 1, every
reader shows it, and every file the run wrote is standard JSON."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.workloads.train.test_numerical_health import strict_loads

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.local_run


@pytest.fixture(scope="module")
def diverged_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("diverge")
    project = tmp / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    config = {"aws:region": "us-east-1", "eksbench:execution": "sequential",
              "eksbench:cluster": {"public_access_cidrs": []},
              "eksbench:gpu_node_groups": [{"name": "g5", "instance_type": "g5.2xlarge", "desired_size": 2,
                                            "max_size": 2}],
              "eksbench:experiments": [{"name": "boom", "workload": "cifar10", "nodes": 2, "steps": 40,
                                        "dataset": "cifar10", "args": ["--lr=1e12"]},
                                       {"name": "calm", "workload": "cifar10", "nodes": 1, "steps": 8,
                                        "dataset": "cifar10"}],
              "eksbench:results": {"home_stack": "organization/eksbench/home"},
              "eksbench:local": {"nodes": 2, "steps": 40, "batch_size": 8, "image_size": 32, "width_per_group": 8}}
    (project / "Pulumi.loc.yaml").write_text(yaml.safe_dump({"config": config}))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "bench", "run", "loc", "--local", "--run-id", "t", "--project-dir",
                           str(project), "--results-root", str(tmp / "results"), "--progress-every", "5"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return done, project, tmp / "results"


def test_the_run_exits_1_and_the_experiment_is_diverged(diverged_run):
    done, _, results = diverged_run
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith(("boom ", "calm "))}
    assert " diverged " in rows["boom"] and " succeeded " in rows["calm"], done.stdout
    assert "[boom] DIVERGED" in done.stdout and "non-finite loss" in done.stderr
    s = json.loads((results / "loc" / "t" / "boom" / "summary.json").read_text())
    assert s["status"] == "diverged" and s["exit_code"] == 87 and s["divergence"]["step"] < 40
    assert s["stop_reason"].startswith("non-finite loss") and s["ranks"]["0"]["final_loss"] is None


def test_every_file_the_run_wrote_is_standard_json(diverged_run):
    _, _, results = diverged_run
    checked = 0
    for path in (results / "loc" / "t").rglob("*"):
        if path.suffix == ".json":
            strict_loads(path.read_text())
            checked += 1
        elif path.suffix == ".jsonl":
            for line in path.read_text().splitlines():
                strict_loads(line)
            checked += 1
    assert checked >= 8


def test_status_and_results_show_the_divergence(diverged_run):
    _, project, results = diverged_run
    from bench.results import frames as loader

    df = loader.load(results / "loc")
    row = df[df["experiment"] == "boom"].iloc[0]
    assert row["status"] == "diverged" and row["error"].startswith("non-finite loss")
    shown = subprocess.run([sys.executable, "-m", "bench", "status", "loc", "--project-dir", str(project),
                            "--results-root", str(results)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    rows = [line.split() for line in shown.stdout.splitlines()]
    assert any(row[1:3] == ["boom", "diverged"] for row in rows), shown.stdout + shown.stderr
