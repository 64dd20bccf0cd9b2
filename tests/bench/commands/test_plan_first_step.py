"""The plan's estimate of the time before the first step: GPU node boot and join, and the image's pull."""

from __future__ import annotations

import pytest

from core.catalog import compat
from infra.cluster import estimate
from infra.cluster.estimate import (
    Node,
    finish_times,
    first_step_minutes,
    image_pull_minutes,
)


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
        assert r["image_running"] == round(max(r["job_created"], r["gpu_nodes_joined"]) + r["image_pull"], 1)
    text = render(plan)
    assert "GPU nodes booted and joined at" in text and "image pull 5.4 min (19.7 GB unpacked)" in text
