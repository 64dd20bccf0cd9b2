"""A pod that takes a whole EFA node requests exactly the EFA interfaces the node's launch template creates.

Both counts come from one place (core.catalog.aws.efa_interfaces). Checked for every EFA type of the
catalog through the pure builders, and through the whole program for the p5 example and a g6e.48xlarge
variant of it (4 network cards, which a hard-coded table once gave 1).
"""

from __future__ import annotations

import copy

import pytest
import yaml

from core.catalog import aws as catalog
from core.config.model import Experiment, GpuNodeGroup
from core.contract.results_location import ResultsLocation
from infra.cluster.node_group import gpu_node_group_spec, launch_template_data
from infra.environment import Environment
from program.offline import evaluate_config
from program.stack_files import ROOT
from workloads.code_manifests import code_config_map_manifest
from workloads.job_manifests import experiment_manifests

EFA_TYPES = sorted(t for t, spec in catalog.INSTANCE_TYPES.items() if spec.efa)
ENV = Environment(namespace="eksbench", service_account="eksbench-trainer", claim_name="eksbench-shared",
                  mount_path="/data", datasets_dir="/data/datasets", results_dir="/data/results/run-001",
                  etcd_endpoint="etcd.eksbench.svc.cluster.local:2379",
                  results=ResultsLocation(None, "eksbench", "dev", "run-001"),
                  datasets_prefix_uri=None)
CODE = code_config_map_manifest({"workloads/__init__.py": ""}, namespace="eksbench")
P5 = yaml.safe_load((ROOT / "Pulumi.p5-fsx.yaml").read_text())["config"]
P5_FILLED = {**P5, "eksbench:cluster": {**P5["eksbench:cluster"], "public_access_cidrs": ["198.18.7.0/32"]}}


def requested(job: dict) -> int:
    return int(job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"])


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_a_whole_node_pod_requests_every_interface_the_launch_template_creates(instance_type):
    group = GpuNodeGroup(name="g", instance_type=instance_type, efa=True, max_size=2, desired_size=2)
    gpus = catalog.INSTANCE_TYPES[instance_type].gpus
    e = Experiment(name="x", min_nodes=2, max_nodes=2, gpus_per_node=gpus)
    job = experiment_manifests(e, env=ENV, node_group=group, bucket="b", run_id="run-001", code_config_map=CODE,
                                 region="us-west-2")["job"]
    interfaces = launch_template_data(gpu_node_group_spec(group), security_group_id="sg-0123")["network_interfaces"]
    assert requested(job) == len(interfaces) == catalog.efa_interfaces(instance_type) >= 1


def test_g6e_48xlarge_has_four_interfaces_on_the_node_and_in_the_request():
    assert catalog.efa_interfaces("g6e.48xlarge") == 4


@pytest.mark.parametrize("instance_type", ["p5.48xlarge", "g6e.48xlarge"])
def test_the_planned_launch_template_and_the_planned_pods_agree(instance_type):
    config = copy.deepcopy(P5_FILLED)
    config["eksbench:gpu_node_groups"][0]["instance_type"] = instance_type
    plan = evaluate_config("p5-fsx", config)
    [template] = [r for r in plan.resources if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"
                  and r["inputs"].get("networkInterfaces")]
    jobs = [r["inputs"] for r in plan.resources if r["type"] == "kubernetes:batch/v1:Job"
            and "vpc.amazonaws.com/efa" in r["inputs"]["spec"]["template"]["spec"]["containers"][0]
            .get("resources", {}).get("limits", {})]
    assert jobs
    for job in jobs:
        assert requested(job) == len(template["inputs"]["networkInterfaces"]) == catalog.efa_interfaces(instance_type)


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_efa_pods_get_huge_pages_as_aws_recipe_asks_and_p5_its_nccl_buffer_sizes(instance_type):
    """The kubelet limits hugetlb to 0 for every page size a pod does not request, so libfabric's huge-page
    buffer pools need the request (core.catalog.fabric.EFA_RECIPE); a whole node asks 5120Mi, a part its share.
    On p5, NCCL_BUFFSIZE and NCCL_P2P_NET_CHUNKSIZE as the recipe and the published p5 figure had them."""
    from core.catalog.fabric import EFA_HUGEPAGES_MIB_PER_NODE

    group = GpuNodeGroup(name="g", instance_type=instance_type, efa=True, max_size=2, desired_size=2)
    node_gpus = catalog.INSTANCE_TYPES[instance_type].gpus
    for gpus in sorted({node_gpus, max(1, node_gpus // 2)}):
        e = Experiment(name="x", min_nodes=2, max_nodes=2, gpus_per_node=gpus)
        job = experiment_manifests(e, env=ENV, node_group=group, bucket="b", run_id="run-001", code_config_map=CODE,
                                     region="us-west-2")["job"]
        main = job["spec"]["template"]["spec"]["containers"][0]
        want = f"{EFA_HUGEPAGES_MIB_PER_NODE * gpus // node_gpus // 2 * 2}Mi"
        assert main["resources"]["limits"]["hugepages-2Mi"] == main["resources"]["requests"]["hugepages-2Mi"] == want
        env = {v["name"]: v.get("value") for v in main["env"]}
        p5 = instance_type.split(".")[0] in ("p5", "p5e", "p5en")
        assert (env.get("NCCL_BUFFSIZE"), env.get("NCCL_P2P_NET_CHUNKSIZE")) == (
            ("8388608", "524288") if p5 else (None, None))
    plain = GpuNodeGroup(name="g", instance_type="p3.16xlarge", max_size=2, desired_size=2)
    job = experiment_manifests(Experiment(name="x", min_nodes=2, max_nodes=2, gpus_per_node=8), env=ENV,
                                 node_group=plain, bucket="b", run_id="run-001", code_config_map=CODE,
                                 region="us-west-2")["job"]
    assert "hugepages-2Mi" not in job["spec"]["template"]["spec"]["containers"][0]["resources"].get("limits", {})
