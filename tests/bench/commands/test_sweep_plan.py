"""``bench plan`` over a stack whose experiment sweeps node counts: the program registers one experiment
per value (its Job, its gate in a sequential stack, its results URI), and a bad list exits 2 in one line."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.bench.conftest import ROOT

STACK = """config:
  aws:region: us-west-2
  eksbench:results:
    home_stack: organization/eksbench/home
  eksbench:cluster:
    public_access_cidrs: ["198.18.0.0/32"]
  eksbench:gpu_node_groups:
    - {name: gpu, instance_type: p4d.24xlarge, max_size: 4}
  eksbench:execution: sequential
  eksbench:experiments:
    - {name: resnet50, nodes: NODES, precision: amp-fp16, steps: 300}
"""


def plan(name: str, nodes: str, *extra: str) -> subprocess.CompletedProcess:
    target = ROOT / f"Pulumi.{name}.yaml"
    target.write_text(STACK.replace("NODES", nodes))
    try:
        return subprocess.run([sys.executable, "-m", "bench", "plan", name, *extra], cwd=ROOT, capture_output=True,
                              text=True, timeout=180)
    finally:
        target.unlink()


def test_a_node_sweep_plans_one_experiment_per_value():
    done = plan("sweep-plan-test", "[1, 2, 4]", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    uris = doc["outputs"]["experiment_results"]
    assert sorted(uris) == ["resnet50-n1", "resnet50-n2", "resnet50-n4"]
    assert uris["resnet50-n2"].endswith("/eksbench/sweep-plan-test/run-001/resnet50-n2/")
    jobs = {r["name"] for r in doc["resources"] if r["type"] == "kubernetes:batch/v1:Job"}
    assert {"experiments-resnet50-n1-job", "experiments-resnet50-n2-job", "experiments-resnet50-n4-job",
            "experiments-resnet50-n2-gate", "experiments-resnet50-n4-gate"} <= jobs  # one after another


def test_a_bad_sweep_value_exits_2_in_one_line():
    done = plan("sweep-plan-bad", '[1, "2:4"]')
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if "experiments[0]" in line]
    assert lines == ['  experiments[0].nodes[1]="2:4": a sweep lists fixed node counts (whole numbers >= 1); an elastic '
                     '"min:max" range cannot be swept, e.g. [1, 2, 4]'], done.stderr
    assert "Traceback" not in done.stderr


def test_the_plan_shows_the_share_of_gpu_node_hours_a_sequential_sweep_leaves_idle():
    """The README's sweep, nodes [1, 2, 4] x 8 GPUs x repeats 3 on a 4-node group: 15 of 36 node-hours idle."""
    target = ROOT / "Pulumi.sweep-plan-idle.yaml"
    target.write_text(STACK.replace("p4d.24xlarge, max_size: 4", "p5.48xlarge, max_size: 4, efa: true")
                      .replace("NODES, precision: amp-fp16, steps: 300", "[1, 2, 4], gpus_per_node: 8, repeats: 3"))
    try:
        done = subprocess.run([sys.executable, "-m", "bench", "plan", "sweep-plan-idle"], cwd=ROOT, capture_output=True,
                              text=True, timeout=180)
    finally:
        target.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("  gpu (4x p5.48xlarge): "))
    assert "9 runs bill 36 node-hours and use 21: 42% idle" in line, line
