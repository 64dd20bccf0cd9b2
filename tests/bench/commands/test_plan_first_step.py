"""The plan's estimate of the time before the first step: GPU node boot and join, and the image's pull."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from core.catalog import compat
from core.catalog.compat import NO_GPU_TRAINING
from core.config.shape import parse_config
from infra.cluster import estimate
from infra.cluster.estimate import (
    Node,
    finish_times,
    first_step_minutes,
    image_pull_minutes,
)

ROOT = Path(__file__).resolve().parents[3]


def test_image_pull_uses_the_cited_rate_and_says_unknown_without_a_size():
    assert image_pull_minutes(20_400) == round(334 / 60, 1)  # the measurement the rate comes from
    assert image_pull_minutes(None) is None
    assert estimate.IMAGE_PULL_MB_PER_S == pytest.approx(61.08, abs=0.01)


def test_the_first_pod_waits_for_its_job_and_its_nodes_then_the_pull():
    got = first_step_minutes(job_created=19.4, nodes_joined=16.1, image_mb=19_700)
    assert got == {"job_created": 19.4, "gpu_nodes_joined": 16.1, "image_pull": 5.4, "image_running": 24.8}
    assert first_step_minutes(job_created=3.0, nodes_joined=16.1, image_mb=None)["image_running"] is None


def test_finish_times_follow_the_longest_chain():
    nodes = [Node("a", "eks:index:Cluster", "", (), True),
             Node("b", "aws:eks/nodeGroup:NodeGroup", "", ("a",), True),
             Node("c", "kubernetes:batch/v1:Job", "", ("a",), True, skip_await=True)]
    t = finish_times(nodes)
    assert t == {"a": 12.0, "b": 16.0, "c": pytest.approx(12.05)}


def test_plan_dev_shows_node_boot_and_the_pull_of_each_experiments_image():
    from bench.commands.plan import render
    from program.offline import evaluate

    plan = evaluate("dev")
    rows = plan.estimate["first_step"]
    assert [r["experiment"] for r in rows] == ["resnet50-synthetic", "cifar10-elastic"]
    for r in rows:
        row = compat.find_image(r["image"])
        assert row is not None and r["image_mb"] == row.size_mb == 19_700  # V100: the CUDA 12.6 DLC
        assert r["image_pull"] == image_pull_minutes(19_700)
        assert r["gpu_nodes_joined"] >= 12.0 + 4.0  # after the control plane, the group's 3-5 min
    first, second = rows
    assert first["image_running"] == round(max(first["job_created"], first["gpu_nodes_joined"]) + first["image_pull"], 1)
    # execution: sequential: cifar10-elastic starts once resnet50-synthetic has ended, a time the plan cannot know
    assert second["after"] == "resnet50-synthetic" and second["image_running"] is None
    assert second["not_before"] == first["image_running"] and second["latest_running"] > first["latest_running"]
    text = render(plan)
    assert "GPU nodes booted and joined at" in text and "image pull 5.4 min (19.7 GB unpacked)" in text
    assert f"cifar10-elastic: starts when resnet50-synthetic ends: after {first['image_running']:.1f} min" in text


STACKS = ROOT / "tests" / "stacks"


def stack_configs() -> list[tuple[str, dict]]:
    """Every experiment stack of the project and of tests/stacks, as its config mapping (p5-fsx with its
    CIDR filled in, as a user must)."""
    out = []
    for path in sorted(ROOT.glob("Pulumi.*.yaml")) + sorted(STACKS.glob("Pulumi.*.yaml")):
        config = yaml.safe_load(path.read_text())["config"]
        if config.get("eksbench:role") == "home":
            continue
        if path.name == "Pulumi.p5-fsx.yaml":
            config = {**config, "eksbench:cluster": {**config["eksbench:cluster"], "public_access_cidrs": ["198.18.7.0/32"]}}
        # experiments of frameworks the cluster refuses (compat.NO_GPU_TRAINING) are a stack's local runs only
        kept = [e for e in config.get("eksbench:experiments", []) if e.get("framework") not in NO_GPU_TRAINING]
        out.append((path.name[len("Pulumi."):-len(".yaml")], {**config, "eksbench:experiments": kept}))
    return out


@pytest.mark.parametrize("stack,config", stack_configs(), ids=[s for s, _ in stack_configs()])
def test_every_stacks_first_pod_times_follow_its_run_order(stack, config):
    """A run that waits for another (execution: sequential, or a repeat) never shows the same first-pod time as
    the run it waits for: it has none, only the bounds; a run that waits for nothing has its own."""
    from core.config.pulumi_config import decode_config, to_pulumi_config
    from program.offline import evaluate_config
    from workloads.experiment_suite_component import run_order

    plan = evaluate_config(stack, config)
    rows = plan.estimate["first_step"]
    raw, region = decode_config(to_pulumi_config(config))
    cfg = parse_config(raw, project="eksbench", stack=stack, region=region)
    order = run_order(cfg.experiments, cfg.execution)
    assert [r["experiment"] for r in rows] == [run.label for _, run, _ in order]
    by_label = {r["experiment"]: r for r in rows}
    for prior, run, waited in order:
        row = by_label[run.label]
        assert row["waits_at_most"] == waited
        if prior is None:
            assert row["after"] is None and row["image_running"] is not None or row["image_pull"] is None
            continue
        before = by_label[prior.label]
        assert row["after"] == prior.label and row["image_running"] is None, row
        known = before["image_running"] if before["image_running"] is not None else before.get("not_before")
        if known is None:  # the run before has an image of unknown size: no time to bound this one by
            assert row["not_before"] is None
            continue
        assert row["not_before"] >= known, row
        if row["latest_running"] is not None:
            assert row["latest_running"] >= row["not_before"] - 0.05 and row["latest_running"] - waited >= 0, row
