"""``bench run --local`` with repeats: 2 runs the experiment twice, one after another, each into its own
folder, and the results reader gives a row per repeat (real torchrun agents)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import yaml

from bench.results import frames as results
from tests.bench.conftest import ROOT

pytestmark = pytest.mark.local_run


def test_repeats_run_in_turn_and_read_back_as_one_row_each(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    config = {"aws:region": "us-east-1", "eksbench:execution": "parallel",
              "eksbench:cluster": {"public_access_cidrs": []},
              "eksbench:gpu_node_groups": [{"name": "g5", "instance_type": "g5.2xlarge", "max_size": 1}],
              "eksbench:results": {"home_stack": "organization/eksbench/home"},
              "eksbench:experiments": [{"name": "rn", "workload": "resnet50", "nodes": 1, "steps": 6,
                                        "dataset": "synthetic", "repeats": 2}],
              "eksbench:local": {"nodes": 1, "steps": 6, "batch_size": 4, "image_size": 32, "width_per_group": 8}}
    (project / "Pulumi.loc.yaml").write_text(yaml.safe_dump({"config": config}))
    cmd = [sys.executable, "-m", "bench", "run", "loc", "--local", "--run-id", "t", "--project-dir", str(project),
           "--results-root", str(tmp_path / "results")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 experiment(s) (2 runs with repeats)" in done.stdout
    out = done.stdout + done.stderr
    # one after another: the second starts after the first ended
    assert out.index("[rn repeat 1/2] succeeded") < out.index("[rn repeat 2/2] started")
    df = results.load(str(tmp_path / "results" / "loc"))
    assert df[["experiment", "repeat", "status"]].values.tolist() == [["rn", 1, "succeeded"], ["rn", 2, "succeeded"]]
    assert (df["samples_per_s"] > 0).all()
    assert [p.parent.name for p in sorted((tmp_path / "results" / "loc" / "t" / "rn").glob("*/summary.json"))] == [
        "repeat_1", "repeat_2"]
    stats = results.repeats(df).iloc[0]
    assert stats["runs"] == 2 and stats["ci95_low"] < stats["samples_per_s_mean"] < stats["ci95_high"]
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "already has results (2 summary.json" in again.stderr
