"""Meaning rules that keep a stack from building and then training nothing: FSx types that cannot link
to S3, parallel experiments that ask a node group for more GPUs than it has, and an autostop deadline
shorter than the experiments' timeouts."""

import copy

import pytest

from core.catalog.pins import CLUSTER_AUTOSCALER_CHARTS
from core.config.model import GpuNodeGroup
from core.config.shape import parse_stack_config
from infra.cluster.autoscaling import node_template_tags
from program.node_group_checks import autoscaler_problems
from program.stack_files import load_stack_config, stack_raw_config
from program.validation import meaning_problems
from tests.core.examples import GOOD
from tests.core.test_autostop import BASE
from tests.program.test_config import parse, problems


def fsx(deployment_type, kind="fsx"):
    raw = copy.deepcopy(GOOD)
    raw["storage"] = {"kind": kind, "fsx": {"deployment_type": deployment_type}}
    return raw


# --- 4. FSx deployment types ----------------------------------------------------------------------

def test_scratch_fsx_is_rejected_naming_key_value_and_allowed_types():
    """Data repository associations exist on PERSISTENT_2 only (AWS FSx for Lustre guide, "Linking your
    file system to an S3 bucket"; pulumi_aws/fsx/data_repository_association.py)."""
    assert problems(fsx("SCRATCH_2")) == [
        'storage.fsx.deployment_type="SCRATCH_2": cannot have data repository associations, which link /datasets '
        'and /results to S3 (FSx for Lustre: PERSISTENT_2 only); allowed: PERSISTENT_2, e.g. "PERSISTENT_2"']


def test_persistent_2_fsx_and_an_unused_fsx_section_pass():
    assert parse(fsx("PERSISTENT_2")).storage.fsx.deployment_type == "PERSISTENT_2"
    assert parse(fsx("SCRATCH_2", kind="efs")).storage.kind == "efs"


# --- 5. parallel experiments and the group's GPUs --------------------------------------------------

def two_experiments(execution, second_gpus=1, second_nodes="1:2"):
    raw = copy.deepcopy(GOOD)
    raw["execution"] = execution
    raw["experiments"] = [{"name": "r50", "workload": "resnet50", "nodes": 2},
                          {"name": "small", "workload": "resnet50", "nodes": second_nodes, "gpus_per_node": second_gpus}]
    return raw


def test_parallel_experiments_that_overfill_a_group_name_the_experiments_and_the_group():
    assert problems(two_experiments("parallel")) == [
        "execution=\"parallel\": experiments r50 (2 x 8), small (2 x 1) run at once on node group 'gpu' and ask 18 "
        "GPUs, but it has 16 at max_size (2 x p3.16xlarge with 8 each); set execution: sequential, or move an "
        'experiment to another node group (gpu_node_groups), e.g. "sequential"']


def test_sequential_experiments_or_ones_that_fit_pass():
    assert parse(two_experiments("sequential")).execution == "sequential"
    raw = two_experiments("parallel", second_nodes=2)
    raw["experiments"][0]["gpus_per_node"] = 4
    raw["experiments"][1]["gpus_per_node"] = 4
    assert len(parse(raw).experiments) == 2  # 2 x 4 + 2 x 4 = 16: exactly the group's GPUs


def test_each_group_counts_only_its_own_experiments():
    raw = two_experiments("parallel")
    raw["gpu_node_groups"].append({"name": "g5", "instance_type": "g5.xlarge", "max_size": 2})
    raw["experiments"][1]["node_group"] = "g5"
    assert len(parse(raw).experiments) == 2
    raw["experiments"][0]["node_group"] = "g5"
    raw["experiments"][0]["gpus_per_node"] = 1
    found = problems(raw)
    assert len(found) == 1 and "on node group 'g5' and ask 4 GPUs, but it has 2 at max_size" in found[0]


def test_the_dev_stack_fits_its_gpus_and_would_not_in_parallel():
    """The shipped dev stack asked 18 GPUs of 16 while it ran its experiments in parallel."""
    cfg = load_stack_config("dev")
    assert cfg.execution == "sequential"
    raw, region = stack_raw_config("dev")
    parallel = parse_stack_config({**raw, "execution": "parallel"}, project="eksbench", stack="dev", region=region)
    found = meaning_problems(parallel)
    assert any(p.startswith('execution="parallel": experiments resnet50-synthetic (2 x 8), cifar10-elastic (2 x 1)')
               for p in found), found


@pytest.mark.parametrize("stack", ["dev", "p5-fsx"])
def test_shipped_stacks_ask_no_more_gpus_at_once_than_their_groups_have(stack):
    raw, region = stack_raw_config(stack)
    cfg = parse_stack_config(raw, project="eksbench", stack=stack, region=region)
    assert not [p for p in meaning_problems(cfg) if p.startswith("execution=")]


def test_a_deadline_shorter_than_the_experiments_timeouts_is_a_meaning_problem():
    two = {**BASE, "execution": "sequential",
           "experiments": [{"name": "a", "timeout_minutes": 60}, {"name": "b", "timeout_minutes": 90, "evaluate": True}]}
    cfg = parse_stack_config({**two, "autostop": {"deadline_minutes": 150}}, project="eksbench", stack="t",
                             region="us-west-2")
    found = [p for p in meaning_problems(cfg) if p.startswith("autostop.")]
    assert found == ["autostop.deadline_minutes=150: is shorter than the experiments' timeouts (180 min, summed, "
                     "execution: sequential), so autostop would stop the GPUs of a run still within them; leave it "
                     "unset for 330, e.g. 210"], found
    cfg = parse_stack_config({**two, "autostop": {"deadline_minutes": 180}}, project="eksbench", stack="t",
                             region="us-west-2")
    assert not [p for p in meaning_problems(cfg) if p.startswith("autostop.")]


# --- Cluster Autoscaler opt-in (gpu_node_groups[].autoscale) ------------------------------------------


def autoscaled_stack(**group):
    raw = copy.deepcopy(GOOD)
    raw["gpu_node_groups"][0].update(group)
    return raw


def test_autoscale_is_off_unless_a_group_opts_in():
    assert parse(autoscaled_stack()).gpu_node_groups[0].autoscale is False
    assert parse(autoscaled_stack(autoscale=True)).gpu_node_groups[0].autoscale is True


def test_a_capacity_block_group_is_refused_by_name():
    raw = autoscaled_stack(autoscale=True, instance_type="p5.48xlarge", capacity_type="CAPACITY_BLOCK",
                capacity_reservation_id="cr-0123456789abcdef0", availability_zone="us-west-2a")
    raw["experiments"] = []
    found = [p for p in problems(raw) if ".autoscale" in p]
    assert found == ["gpu_node_groups[0].autoscale=true: node group 'gpu' is a Capacity Block, which bills the whole "
                     "block whatever runs: scaling it down saves nothing; set it to false, e.g. false"]


def test_a_kubernetes_minor_without_a_pinned_chart_is_refused_at_plan_time(monkeypatch):
    monkeypatch.delitem(CLUSTER_AUTOSCALER_CHARTS, "1.35")
    raw = autoscaled_stack(autoscale=True)
    raw["cluster"]["kubernetes_version"] = "1.35"
    found = [p for p in problems(raw) if p.startswith("cluster.kubernetes_version")]
    assert len(found) == 1 and "no Cluster Autoscaler chart pinned, which gpu_node_groups[0].autoscale needs" in found[0]
    assert parse(autoscaled_stack()).cluster.kubernetes_version  # a stack that does not opt in needs no pin


def test_every_efa_group_that_opts_in_carries_both_efa_resource_tags():
    efa = GpuNodeGroup(name="p5", instance_type="p5.48xlarge", efa=True, max_size=2, autoscale=True)
    tags = node_template_tags(efa)
    template = "k8s.io/cluster-autoscaler/node-template"
    assert tags[f"{template}/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags[f"{template}/resources/hugepages-2Mi"] == "5120Mi"
    assert tags[f"{template}/label/eksbench.io/pool"] == "p5"
    assert tags[f"{template}/taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert tags[f"{template}/label/k8s.amazonaws.com/accelerator"] == "nvidia-h100"
    assert node_template_tags(GpuNodeGroup(name="p5", instance_type="p5.48xlarge", efa=True)) == {}


def test_an_autoscaled_group_mounting_lustre_tells_the_autoscaler_of_its_ready_label():
    # FSx pods select the label a node sets itself once its Lustre client works; scaled from 0, the autoscaler
    # only knows a node's labels from these tags, and without this one no new node would fit an FSx pod
    group = GpuNodeGroup(name="p5", instance_type="p5.48xlarge", max_size=2, autoscale=True)
    tag = "k8s.io/cluster-autoscaler/node-template/label/eksbench.io/lustre-client"
    assert node_template_tags(group, lustre_client=True)[tag] == "ready"
    assert tag not in node_template_tags(group)


def test_the_rule_names_an_efa_group_whose_tags_leave_a_resource_out(monkeypatch):
    import program.node_group_checks as v

    cfg = parse(autoscaled_stack(autoscale=True, instance_type="p5.48xlarge", efa=True))
    monkeypatch.setattr(v, "node_template_tags", lambda g: {})
    assert autoscaler_problems(cfg) == [
        "gpu_node_groups[0].autoscale=true: EFA group 'gpu' lacks the node-template tags for vpc.amazonaws.com/efa, "
        "hugepages-2Mi: scaled from 0, no EFA pod would fit it, e.g. false"]


@pytest.mark.parametrize("minor", list(CLUSTER_AUTOSCALER_CHARTS))
def test_each_pin_runs_cluster_autoscaler_of_the_clusters_minor(minor):
    chart, app = CLUSTER_AUTOSCALER_CHARTS[minor]
    assert app.startswith(minor + ".") and chart.startswith("9.")
