"""Meaning rules that keep a stack from building and then training nothing: FSx types that cannot link
to S3, parallel experiments that ask a node group for more GPUs than it has, an autostop deadline
shorter than the experiments' timeouts, and a language model its framework, GPUs or memory cannot train."""

import copy
from dataclasses import replace

import pytest
import yaml

from core.catalog.pins import CLUSTER_AUTOSCALER_CHARTS
from core.config.fields import ConfigError
from core.config.model import Experiment, GpuNodeGroup
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


# --- 6. a language model (llama3): program.language_model_checks -------------------------------------------

def llama(*experiments: dict, instance_type: str = "p5.48xlarge") -> dict:
    """GOOD with its group on ``instance_type`` (4 nodes at most) and these experiments, sequential."""
    raw = copy.deepcopy(GOOD)
    raw["gpu_node_groups"] = [{"name": "gpu", "instance_type": instance_type, "max_size": 4}]
    raw["experiments"] = [{"name": f"e{i}", "batch_size": 1, **e} for i, e in enumerate(experiments)]
    return raw


EIGHT_B = {"workload": "llama3", "model_size": "8b", "precision": "bf16"}


def test_8b_on_one_p5_node_passes():
    (e,) = parse(llama(EIGHT_B)).experiments
    assert (e.model_size, e.seq_len, e.activation_checkpoint) == ("8b", None, "selective")


def test_llama3_runs_on_pytorch_alone_and_says_why_the_others_cannot():
    for framework, why in (("tensorflow", "has no language model"), ("horovod", "no FSDP2 or tensor parallelism"),
                           ("paddle", "has no language model")):
        head = f'experiments[0].framework="{framework}": does not run workload "llama3" (supported: resnet50, cifar10)'
        found = [p for p in problems(llama({**EIGHT_B, "framework": framework})) if p.startswith(head)]
        assert len(found) == 1 and why in found[0] and found[0].endswith('use framework pytorch, e.g. "pytorch"')


def test_a_language_models_keys_on_another_workload_are_refused_each_by_name():
    found = problems(llama({"workload": "resnet50", "seq_len": 4096, "tensor_parallel": 2, "target_loss": 3.3,
                            "precision": "fp8"}))
    assert found == [
        "experiments[0].seq_len=4096: is a language model's key (workload llama3) and workload 'resnet50' has no "
        'language model; remove it, e.g. workload: "llama3"',
        "experiments[0].tensor_parallel=2: is a language model's key (workload llama3) and workload 'resnet50' has "
        'no language model; remove it, e.g. workload: "llama3"',
        "experiments[0].target_loss=3.3: is a language model's key (workload llama3) and workload 'resnet50' has no "
        'language model; remove it, e.g. workload: "llama3"',
        'experiments[0].precision="fp8": float8 (torchao) trains a language model\'s linear layers (workload llama3) '
        'only; resnet50 trains in fp32, amp-fp16 or bf16, e.g. "amp-fp16"']


def test_fp8_needs_float8_tensor_cores_and_amp_fp16_runs_llama3_on_a_v100():
    fp8 = {**EIGHT_B, "precision": "fp8"}
    for instance_type, gpu, instead in (("p4d.24xlarge", "A100", "bf16"), ("p3dn.24xlarge", "V100", "amp-fp16")):
        found = [p for p in problems(llama(fp8, instance_type=instance_type)) if ".precision=" in p]
        assert found == [
            f'experiments[0].precision="fp8": {gpu} GPUs ({instance_type}, node group \'gpu\') have no float8 tensor '
            "cores: torchao's float8 runs torch._scaled_mm, which needs compute capability 8.9 or later (PyTorch's "
            f'check; torchao\'s docs); on AWS: L4, L40S, H100, H200; use {instead} there, e.g. "{instead}"']
    for instance_type in ("p5.48xlarge", "p5e.48xlarge", "g6e.48xlarge"):
        assert parse(llama({**fp8, "model_size": "1b"}, instance_type=instance_type)).experiments[0].precision == "fp8"
    # amp-fp16 is llama3's on a V100 (its 32 GB p3dn, 1B, full checkpointing on 4 nodes); bf16 is not
    v100 = {"workload": "llama3", "model_size": "1b", "precision": "amp-fp16", "activation_checkpoint": "full",
            "seq_len": 2048, "nodes": 4}
    assert parse(llama(v100, instance_type="p3dn.24xlarge")).experiments[0].precision == "amp-fp16"
    assert any(p.startswith('experiments[0].precision="bf16": V100 GPUs') for p in
               problems(llama({**v100, "precision": "bf16"}, instance_type="p3dn.24xlarge")))


def test_tensor_parallel_seq_len_and_hsdp_rules_name_their_keys():
    assert problems(llama({**EIGHT_B, "tensor_parallel": 3})) == [
        "experiments[0].tensor_parallel=3: must divide gpus_per_node (8) and the 8B model's 32 heads and 8 KV heads: "
        "a TP group is within one node and each of its GPUs computes whole heads, e.g. 2"]  # no seq_len advice for 3
    assert problems(llama({**EIGHT_B, "tensor_parallel": 4, "seq_len": 4094})) == [
        "experiments[0].seq_len=4094: must be a multiple of tensor_parallel (4): sequence parallelism splits each "
        "sequence among the TP group's GPUs, e.g. 4092"]
    assert parse(llama({**EIGHT_B, "tensor_parallel": 2})).experiments[0].tensor_parallel == 2
    assert problems(llama({**EIGHT_B, "sharding": "hsdp"})) == [
        'experiments[0].sharding="hsdp": HSDP replicates the model across nodes and shards it within one, and this '
        'experiment has 1 node; use fsdp, or nodes >= 2, e.g. "fsdp"']
    assert parse(llama({**EIGHT_B, "sharding": "hsdp", "nodes": 2})).experiments[0].sharding == "hsdp"


def test_a_model_its_gpus_cannot_hold_is_refused_with_the_figures_and_what_fits():
    (seventy,) = problems(llama({**EIGHT_B, "model_size": "70b"}))
    assert seventy.startswith('experiments[0].model_size="70b": needs about 269.5 GiB a GPU, more than each H100\'s '
                              "80 GiB (p5.48xlarge, node group 'gpu') at nodes 1, batch_size 1, seq_len 8192, ")
    assert "(state 131.4, activations 121.5," in seventy and "an estimate, core/catalog/llm_memory.py" in seventy
    assert seventy.endswith("it fits with activation_checkpoint: full and nodes: 3, e.g. activation_checkpoint: full "
                            "and nodes: 3")
    (v100,) = problems(llama({**EIGHT_B, "precision": "amp-fp16"}, instance_type="p3.16xlarge"))
    assert v100.startswith('experiments[0].model_size="8b": needs about 50.6 GiB a GPU, more than each V100\'s 16 GiB '
                           "(p3.16xlarge, node group 'gpu')")
    (two,) = problems(llama({**EIGHT_B, "batch_size": 2}))  # 81.1 GiB: each single change below fits
    assert two.endswith("it fits with nodes: 2 or activation_checkpoint: full or tensor_parallel: 2 or batch_size: 1, "
                        "e.g. nodes: 2")


def test_a_local_run_is_not_refused_for_the_clusters_gpu_memory(tmp_path):
    """``eksbench run --local`` trains its ``local:`` shape on this machine: the memory rule judges the cluster's node
    group only (program.validation, ``cluster``), and the program and plan still refuse the stack."""
    raw = llama({**EIGHT_B, "model_size": "70b"})
    (tmp_path / "Pulumi.big.yaml").write_text(yaml.safe_dump(
        {"config": {"aws:region": "us-west-2", **{f"eksbench:{k}": v for k, v in raw.items()}}}))
    assert load_stack_config("big", tmp_path, cluster=False).experiments[0].model_size == "70b"
    with pytest.raises(ConfigError) as refused:
        load_stack_config("big", tmp_path)
    assert [p[:41] for p in refused.value.problems] == ['experiments[0].model_size="70b": needs ab']


def test_a_language_models_data_is_judged_before_the_nodes_boot():
    """Refused in the plan, where each of these failed every rank at its first batch or was silently ignored."""
    from program.language_model_checks import language_model_problems

    base = Experiment(name="lm", workload="llama3", model_size="8b", precision="bf16", gpus_per_node=8,
                      dataset="fineweb-edu-10bt-sample")
    assert language_model_problems("experiments[0]", base, None) == []
    (vocab,) = language_model_problems("experiments[0]", replace(base, model_size="tiny"), None)
    assert vocab.startswith('experiments[0].model_size="tiny": embeds 257 token ids and fineweb-edu-10bt-sample is '
                            "tokenized into 128,256 (llama3)")
    synthetic = replace(base, dataset="synthetic", val_every=100, target_loss=3.3)
    assert [p.split("=")[0] for p in language_model_problems("experiments[0]", synthetic, None)] == [
        "experiments[0].val_every", "experiments[0].target_loss"]
    (mode,) = language_model_problems("experiments[0]", replace(base, compile_mode="max-autotune"), None)
    assert mode.startswith('experiments[0].compile_mode="max-autotune": a language model compiles each block')
    assert language_model_problems("experiments[0]", replace(base, dataset="text-bytes"), None) == []
