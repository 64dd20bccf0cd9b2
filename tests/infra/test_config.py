"""Config parsing: every bad input gets one message naming key, value and rule; defaults agree."""

import copy

import pytest
import yaml

from bench.stack_files import ROOT, load_stack_config
from program.validation import validated_config
from spec.config import Cluster
from spec.fields import ConfigError
from spec.pulumi_config import decode_config, to_pulumi_config
from spec.shape import parse_stack_config

GOOD = {
    "gpu_node_groups": [{"name": "gpu", "instance_type": "p3.16xlarge", "max_size": 2}],
    "experiments": [{"name": "r50", "workload": "resnet50", "nodes": 2}],
}


def parse(raw, region="us-west-2"):
    # Through the CLI's serialisation, as pulumi up would hand it over.
    stack_file = {f"eksbench:{k}": v for k, v in raw.items()} | ({"aws:region": region} if region else {})
    pulumi_config = to_pulumi_config(stack_file)
    decoded, reg = decode_config(pulumi_config)
    return validated_config(decoded, project="eksbench", stack="t", region=reg)


def problems(raw, region="us-west-2"):
    with pytest.raises(ConfigError) as e:
        parse(raw, region)
    return e.value.problems


def with_(path, value):
    raw = copy.deepcopy(GOOD)
    target = raw
    *head, last = path
    for key in head:
        target = target.setdefault(key, {}) if isinstance(key, str) else target[key]
    target[last] = value
    return raw


def test_good_config_parses_with_defaults():
    cfg = parse(GOOD)
    assert cfg.storage.kind == "efs" and cfg.network.az_count == 3 and cfg.run_id == "run-001"
    assert cfg.gpu_node_groups[0].gpus_per_node == 8
    assert cfg.experiments[0].gpus_per_node == 8 and cfg.experiments[0].min_nodes == 2


@pytest.mark.parametrize("raw, expected", [
    (with_(["storag"], {"kind": "efs"}), 'storag={"kind": "efs"}: unknown key; allowed keys here: cluster,'),
    (with_(["storage", "kind"], "nfs"), 'storage.kind="nfs": must be one of efs, fsx, e.g. "efs"'),
    (with_(["storage", "knd"], "efs"), 'storage.knd="efs": unknown key'),
    (with_(["gpu_node_groups", 0, "instance_type"], "m5.large"), 'gpu_node_groups[0].instance_type="m5.large": is not a GPU instance type'),
    (with_(["gpu_node_groups", 0, "instance_type"], "p9.huge"), 'gpu_node_groups[0].instance_type="p9.huge": not in the instance catalog'),
    (with_(["gpu_node_groups", 0, "min_size"], 3), "gpu_node_groups[0].max_size=2: must be >= min_size (3), e.g. 3"),
    (with_(["gpu_node_groups", 0, "max_size"], 0), "gpu_node_groups[0].max_size=0: must be >= 1"),
    (with_(["gpu_node_groups", 0, "max_size"], "two"), 'gpu_node_groups[0].max_size="two": must be a whole number'),
    (with_(["gpu_node_groups", 0, "ami_type"], "AL2_x86_64_GPU"), 'gpu_node_groups[0].ami_type="AL2_x86_64_GPU": must be one of AL2023_x86_64_NVIDIA, BOTTLEROCKET_x86_64_NVIDIA'),
    (with_(["gpu_node_groups"], []), "gpu_node_groups=[]: must be a non-empty list"),
    (with_(["cluster", "kubernetes_version"], "1.20"), 'cluster.kubernetes_version="1.20": EKS offers 1.30'),
    (with_(["cluster", "kubernetes_version"], 1.3), 'cluster.kubernetes_version=1.3: must be a string'),
    (with_(["cluster", "public_access_cidrs"], ["10.0.0.1/8"]), 'cluster.public_access_cidrs[0]="10.0.0.1/8": must be an IPv4 CIDR block'),
    (with_(["network", "vpc_cidr"], "10.0.0.0/33"), 'network.vpc_cidr="10.0.0.0/33": must be an IPv4 CIDR block'),
    (with_(["datasets_uri"], "s3:/bucket"), 'datasets_uri="s3:/bucket": must be an S3 URI'),
    (with_(["datasets_uri"], "s3://UPPER/x/"), 'datasets_uri="s3://UPPER/x/": must be an S3 URI'),
    (with_(["experiments", 0, "framework"], "mxnet"), 'experiments[0].framework="mxnet": Apache MXNet was retired'),
    (with_(["experiments", 0, "nodes"], "3:2"), 'experiments[0].nodes="3:2": min:max needs 1 <= min <= max'),
    (with_(["experiments", 0, "nodes"], 0), "experiments[0].nodes=0: must be a node count >= 1"),
    (with_(["experiments", 0, "nodes"], 3), "experiments[0].nodes=3: needs 3 nodes but node group 'gpu' has max_size 2"),
    (with_(["experiments", 0, "precision"], "fp8"), 'experiments[0].precision="fp8": must be one of fp32, amp-fp16, bf16'),
    (with_(["experiments", 0, "image"], "pytorch/pytorch:latest"), 'experiments[0].image="pytorch/pytorch:latest": must pin a version'),
    (with_(["experiments", 0, "gpus_per_node"], 9), "experiments[0].gpus_per_node=9: must be <= 8"),
    (with_(["storage", "fsx"], {"storage_capacity_gib": 1300}), "storage.fsx.storage_capacity_gib=1300: must be 1200 or a multiple of 2400"),
    (with_(["storage", "preload"], True), "storage.preload=true: applies to storage.kind \"fsx\" only"),
    (with_(["execution"], "serial"), 'execution="serial": must be one of parallel, sequential'),
    (with_(["network", "existing"], {"vpc_id": "vpc-0123456789abcdef0", "private_subnet_ids": ["subnet-01234567"]}),
     "network.existing.private_subnet_ids=[\"subnet-01234567\"]: an existing VPC needs at least two private subnets"),
])
def test_bad_value_names_key_value_and_rule(raw, expected):
    found = problems(raw)
    assert any(p.startswith(expected) for p in found), found


def test_every_problem_is_reported_at_once():
    raw = with_(["storage", "kind"], "nfs")
    raw["gpu_node_groups"][0]["instance_type"] = "m5.large"
    raw["bogus"] = 1
    assert len(problems(raw)) == 3


def test_missing_region_is_reported():
    assert any(p.startswith("aws:region: is required") for p in problems(GOOD, region=None))


def test_messages_are_single_lines():
    for p in problems(with_(["storage", "kind"], "nfs")):
        assert "\n" not in p and "Traceback" not in p


def test_pulumi_yaml_defaults_match_the_parser():
    """Pulumi.yaml's declared defaults are documentation the CLI applies; the parser must agree."""
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    cfg = parse(GOOD)
    for key, spec in declared.items():
        if "default" in spec:
            assert getattr(cfg, key) == spec["default"], key
    assert Cluster().kubernetes_version in yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())[
        "config"]["eksbench:cluster"]["kubernetes_version"]


def test_scalar_strings_are_not_turned_into_numbers():
    raw = with_(["cluster", "kubernetes_version"], "1.30")
    assert parse(raw).cluster.kubernetes_version == "1.30"


@pytest.mark.parametrize("stack", sorted(p.name[7:-5] for p in ROOT.glob("Pulumi.*.yaml")))
def test_every_stack_file_parses(stack):
    assert load_stack_config(stack).stack == stack


def test_efa_and_placement_follow_the_instance_type():
    cfg = parse(with_(["gpu_node_groups", 0, "instance_type"], "p5.48xlarge"))
    g = cfg.gpu_node_groups[0]
    assert g.efa and g.placement_group
    assert not parse(GOOD).gpu_node_groups[0].efa
    assert any("does not support EFA" in p for p in problems(with_(["gpu_node_groups", 0, "efa"], True)))


def test_meaning_rules_run_only_on_a_clean_shape():
    """A bad value is reported once, and never judged again through the default standing in for it.

    Before the two stages, max_size=-1 also gave 'desired_size=2: must be between min_size (0) and max_size (1)'."""
    raw = with_(["gpu_node_groups", 0, "max_size"], -1)
    raw["gpu_node_groups"][0].update(min_size=0, desired_size=2)
    raw["experiments"][0]["nodes"] = 1
    found = problems(raw)
    assert found == ["gpu_node_groups[0].max_size=-1: must be >= 1, e.g. 2"], found


def test_shape_stage_alone_accepts_what_only_meaning_rejects():
    raw = with_(["gpu_node_groups", 0, "min_size"], 3)  # max_size 2 < min_size 3: a cross-field rule
    cfg = parse_stack_config(raw, project="eksbench", stack="t", region="us-west-2")
    assert cfg.gpu_node_groups[0].min_size == 3
    assert problems(raw) == ["gpu_node_groups[0].max_size=2: must be >= min_size (3), e.g. 3"]


def test_unknown_dataset_is_a_meaning_problem_naming_the_catalog():
    found = problems(with_(["experiments", 0, "dataset"], "mnist"))
    assert any(p.startswith('experiments[0].dataset="mnist": must be one of synthetic,') for p in found), found
