"""Every GPU pod both shipped stacks plan runs an image that can train on the node group it is scheduled to.

Read from the plan itself (what `pulumi up` would register): each Job's GPU containers give the image,
its nodeSelector the group and instance type, and that group's aws.eks.NodeGroup the AMI type. Each pair
is judged from the table's rows (core/catalog/compat.py) by tests/support/compat_oracle.py. The dev
stack with the old default (the CUDA 13 DLC) is refused by the plan, naming the key and the group.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from core.catalog import compat, pins
from core.config.fields import ConfigError
from infra.environment import GPU_NODE_LABEL_KEY
from program.offline import evaluate, evaluate_config
from program.stack_files import ROOT
from tests.support.compat_oracle import oracle_runs

DEV = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
P5 = yaml.safe_load((ROOT / "Pulumi.p5-fsx.yaml").read_text())["config"]
# The p5 example with its placeholder CIDR filled in, as a user would before pulumi up.
P5_FILLED = {**P5, "eksbench:cluster": {**P5["eksbench:cluster"], "public_access_cidrs": ["198.18.7.0/32"]}}


def planned_gpu_pairs(plan) -> list[tuple[str, str, str, str, str]]:
    """(job, container image, group, instance type, AMI type) of every container that requests a GPU."""
    amis = {}
    for r in plan.resources:
        if r["type"] == "aws:eks/nodeGroup:NodeGroup":
            pool = (r["inputs"].get("labels") or {}).get(GPU_NODE_LABEL_KEY)
            if pool:
                amis[pool] = r["inputs"]["amiType"]
    pairs = []
    for r in plan.resources:
        if r["type"] != "kubernetes:batch/v1:Job":
            continue
        pod = r["inputs"]["spec"]["template"]["spec"]
        selector = pod.get("nodeSelector") or {}
        for c in pod["containers"]:
            if "nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {}):
                group = selector[GPU_NODE_LABEL_KEY]
                pairs.append((r["urn"].rsplit("::", 1)[-1], c["image"], group,
                              selector["node.kubernetes.io/instance-type"], amis[group]))
    return pairs


@pytest.fixture(scope="module", params=["dev", "p5-fsx"])
def shipped_plan(request):
    return evaluate("dev") if request.param == "dev" else evaluate_config("p5-fsx", P5_FILLED)


def test_every_planned_gpu_pod_of_the_shipped_stacks_runs_where_it_is_scheduled(shipped_plan):
    pairs = planned_gpu_pairs(shipped_plan)
    assert pairs, "no GPU pods planned"
    for job, image, group, instance_type, ami_type in pairs:
        row = compat.find_image(image)
        assert row is not None, (job, image)
        assert oracle_runs(row, instance_type, ami_type), (job, image, group, instance_type, ami_type)


def test_the_dev_stack_on_the_old_default_image_is_refused_naming_the_key_and_the_group():
    old = pins.training_image(DEV["aws:region"])  # the CUDA 13 DLC every experiment used to get
    config = copy.deepcopy(DEV)
    for e in config["eksbench:experiments"]:
        e["image"] = old
    with pytest.raises(ConfigError) as err:
        evaluate_config("dev", config)
    lines = [p for p in err.value.problems if "image=" in p]
    assert [p.split("=", 1)[0] for p in lines] == ["experiments[0].image", "experiments[1].image"]
    assert all("node group 'p3'" in p and "sm_70" in p for p in lines), lines
