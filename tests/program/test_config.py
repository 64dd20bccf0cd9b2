"""Config validation (``program.validation``: shape, then meaning) through the CLI's serialisation, and the
shipped stack files (``program.stack_files``): every bad input gets one message naming key, value and rule;
defaults agree."""

import copy

import pytest
import yaml

from core.catalog import aws as catalog
from core.config.fields import ConfigError
from core.config.model import Cluster
from core.config.pulumi_config import decode_config, to_pulumi_config
from core.config.shape import (
    PROJECT_DEFAULTS,
    parse_config,
    parse_stack_config,
    stack_role,
)
from program.stack_files import ROOT, load_stack_config, stack_raw_config
from program.validation import validated_config
from tests.core.examples import GOOD

TODAY = "2026-11-22"


def parse(raw, region="us-west-2", today=TODAY):
    # Through the CLI's serialisation, as pulumi up would hand it over.
    stack_file = {f"eksbench:{k}": v for k, v in raw.items()} | ({"aws:region": region} if region else {})
    pulumi_config = to_pulumi_config(stack_file)
    decoded, reg = decode_config(pulumi_config)
    return validated_config(decoded, project="eksbench", stack="t", region=reg, today=today)


def problems(raw, region="us-west-2", today=TODAY):
    with pytest.raises(ConfigError) as e:
        parse(raw, region, today)
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
    (with_(["storag"], {"kind": "efs"}), 'storag={"kind": "efs"}: unknown key; did you mean \'storage\'? allowed keys here: autostop, cluster,'),
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
    (with_(["cluster", "kubernetes_version"], "1.30"), 'cluster.kubernetes_version="1.30": extended support ended on 2026-07-23'),
    (with_(["cluster"], {}), "cluster.public_access_cidrs: is required"),
    (with_(["cluster", "public_access_cidrs"], ["203.0.113.0/24"]), 'cluster.public_access_cidrs[0]="203.0.113.0/24": is a documentation range'),
    (with_(["cluster", "public_access_cidrs"], ["198.51.100.7/32"]), 'cluster.public_access_cidrs[0]="198.51.100.7/32": is a documentation range'),
    (with_(["cluster", "public_access_cidrs"], ["192.0.2.0/24"]), 'cluster.public_access_cidrs[0]="192.0.2.0/24": is a documentation range'),
    (with_(["datasets_uri"], "s3://my-datasets-bucket/datasets/"), 'datasets_uri="s3://my-datasets-bucket/datasets/": names a placeholder bucket'),
    (with_(["results"], {"bucket": "example-results"}), 'results.bucket="example-results": names a placeholder bucket'),
    (with_(["results"], {}) | {"experiments": [{"name": "t", "workload": "resnet50", "dataset": "tiny-imagenet-200"}]},
     "results.home_stack: is required: experiments[0] trains on the prepared dataset 'tiny-imagenet-200'"),
    (with_(["results"], {}), "results.home_stack: is required: results go to a bucket this stack never creates"),
    (with_(["results", "bucket"], "team-results"), 'results.bucket="team-results": and results.home_stack are both set'),
    (with_(["results", "home_stack"], "home"), 'results.home_stack="home": must match'),
    (with_(["role"], "homes"), 'role="homes": must be one of experiment, home'),
    (with_(["storage", "efs"], {"throughput_mode": "elastic", "performance_mode": "maxIO"}), 'storage.efs.performance_mode="maxIO": EFS Elastic throughput requires'),
    (with_(["network", "azs"], ["us-west-2a"]), 'network.azs=["us-west-2a"]: needs at least two distinct zones'),
    (with_(["gpu_node_groups", 0, "capacity_type"], "CAPACITY_BLOCK"), "gpu_node_groups[0].capacity_reservation_id: is required"),
    (with_(["gpu_node_groups", 0, "capacity_type"], "CAPACITY_BLOCK"), "gpu_node_groups[0].availability_zone: is required"),
    (with_(["gpu_node_groups", 0, "capacity_reservation_id"], "cr-0123456789abcdef0"), 'gpu_node_groups[0].capacity_reservation_id="cr-0123456789abcdef0": applies to capacity_type "CAPACITY_BLOCK" only'),
    (with_(["gpu_node_groups", 0, "subnet_id"], "subnet-0123456789abcdef0"), 'gpu_node_groups[0].subnet_id="subnet-0123456789abcdef0": applies to an existing VPC'),
    (with_(["gpu_node_groups", 0, "capacity_type"], "RESERVED"), 'gpu_node_groups[0].capacity_type="RESERVED": must be one of ON_DEMAND, SPOT, CAPACITY_BLOCK'),
    (with_(["cluster", "kubernetes_version"], 1.3), 'cluster.kubernetes_version=1.3: must be a string'),
    (with_(["cluster", "public_access_cidrs"], ["10.0.0.1/8"]), 'cluster.public_access_cidrs[0]="10.0.0.1/8": must be an IPv4 CIDR block'),
    (with_(["network", "vpc_cidr"], "10.0.0.0/33"), 'network.vpc_cidr="10.0.0.0/33": must be an IPv4 CIDR block'),
    (with_(["datasets_uri"], "s3:/bucket"), 'datasets_uri="s3:/bucket": must be an S3 URI'),
    (with_(["datasets_uri"], "s3://UPPER/x/"), 'datasets_uri="s3://UPPER/x/": must be an S3 URI'),
    (with_(["experiments", 0, "framework"], "mxnet"), 'experiments[0].framework="mxnet": Apache MXNet was retired'),
    (with_(["experiments", 0, "nodes"], "3:2"), 'experiments[0].nodes="3:2": min:max needs 1 <= min <= max'),
    (with_(["experiments", 0, "nodes"], 0), "experiments[0].nodes=0: must be a node count >= 1"),
    (with_(["experiments", 0, "nodes"], 3), "experiments[0].nodes=3: needs 3 nodes but node group 'gpu' has max_size 2"),
    (with_(["experiments", 0, "precision"], "fp16"), 'experiments[0].precision="fp16": must be one of fp32, amp-fp16, bf16, fp8'),
    (with_(["experiments", 0, "precision"], "fp8"), 'experiments[0].precision="fp8": float8 (torchao) trains a language model'),
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


def file_problems(stack_file: dict) -> list[str]:
    """The problems of a stack file's ``config:`` mapping, keys as written (``eksbench:x``, ``aws:region``)."""
    raw, region = decode_config(to_pulumi_config(stack_file))
    with pytest.raises(ConfigError) as e:
        if stack_role(raw) == "home":
            parse_config(raw, project="eksbench", stack="t", region=region)
        else:
            validated_config(raw, project="eksbench", stack="t", region=region, today=TODAY)
    return e.value.problems


def test_a_misspelled_namespace_is_refused_with_the_key_it_meant():
    """`eksbnech:run_id: x` once ran silently on run-001: a namespace a typo away from a known one is refused,
    naming the key and its value and the key meant; other providers' keys still pass untouched."""
    written = {"aws:region": "us-west-2", **{f"eksbench:{k}": v for k, v in GOOD.items()}}
    found = file_problems({**written, "eksbnech:run_id": "run-002", "asw:profile": "dev",
                           "kubernetes:context": "mine", "pulumi:tags": {"a": "b"}, "tls:x": "1"})
    assert sorted(found) == [
        "asw:profile=\"dev\": unknown namespace 'asw' (a stack file holds eksbench:, aws:, kubernetes:, ... keys), "
        "so the key would be ignored; did you mean 'aws:profile'?",
        "eksbnech:run_id=\"run-002\": unknown namespace 'eksbnech' (a stack file holds eksbench:, aws:, "
        "kubernetes:, ... keys), so the key would be ignored; did you mean 'eksbench:run_id'?"], found
    home = file_problems({"aws:region": "us-west-2", "eksbench:role": "home", "EKSBench:tags": {"team": "ml"}})
    assert home == ["EKSBench:tags={\"team\": \"ml\"}: unknown namespace 'EKSBench' (a stack file holds eksbench:, "
                    "aws:, kubernetes:, ... keys), so the key would be ignored; did you mean 'eksbench:tags'?"], home


@pytest.mark.parametrize("key, meant", [
    ("eksbnech:run_id", "eksbench:run_id"), ("ekbench:x", "eksbench:x"), ("eksbench2:x", "eksbench:x"),
    ("asw:region", "aws:region"), ("kubernets:context", "kubernetes:context"), ("pulumy:tags", "pulumi:tags"),
    ("eksbench:run_id", None), ("aws:region", None), ("tls:x", None), ("ec2:x", None), ("k8s:x", None),
    ("mycompany:owner", None), ("run_id", None)])
def test_which_namespaces_are_typos(key, meant):
    from core.config.pulumi_config import misspelled_key

    assert misspelled_key(key) == meant


def test_an_unknown_key_says_which_it_probably_meant():
    assert any(p.startswith("experiments[0].nodez=2: unknown key; did you mean 'nodes'? allowed keys here: "
                            "activation_checkpoint, args,")
               for p in problems(with_(["experiments", 0, "nodez"], 2)))
    far = [p for p in problems(with_(["storage", "zzz"], 1)) if p.startswith("storage.zzz")]
    assert far and "did you mean" not in far[0], far  # nothing close: no guess, the allowed keys only


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
    assert {k: spec["default"] for k, spec in declared.items() if "default" in spec} == PROJECT_DEFAULTS
    for stack_file in ROOT.glob("Pulumi.*.yaml"):
        if yaml.safe_load(stack_file.read_text())["config"].get("eksbench:role") == "home":
            continue
        assert yaml.safe_load(stack_file.read_text())["config"]["eksbench:cluster"]["kubernetes_version"] == \
            Cluster().kubernetes_version, stack_file.name


def test_every_default_less_project_key_is_set_in_every_stack_file():
    """The CLI refuses a stack that leaves a declared key without a default unset (pulumi/pulumi#10832);
    the mock engine does not, so this checks it. Failed on the old Pulumi.yaml (datasets_uri)."""
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text()).get("config") or {}
    required = [k for k, spec in declared.items() if not (isinstance(spec, dict) and "default" in spec)]
    for stack_file in sorted(ROOT.glob("Pulumi.*.yaml")):
        config = yaml.safe_load(stack_file.read_text()).get("config") or {}
        for key in required:
            assert f"eksbench:{key}" in config, f"{stack_file.name} leaves {key} unset; pulumi up would refuse it"


def test_the_default_kubernetes_version_is_the_newest_every_pin_covers_and_has_a_schema():
    import kubernetes_validate  # noqa: F401

    from core.catalog.pins import CLUSTER_AUTOSCALER_CHARTS
    from tests.support.k8s_schema import schema_errors

    newest = max(catalog.EKS_VERSIONS, key=lambda v: tuple(map(int, v.split("."))))
    assert catalog.NEWEST_EKS_VERSION == newest
    covered = max(CLUSTER_AUTOSCALER_CHARTS, key=lambda v: tuple(map(int, v.split("."))))
    assert Cluster().kubernetes_version == min(newest, covered, key=lambda v: tuple(map(int, v.split("."))))
    autoscaled = with_(["gpu_node_groups", 0, "autoscale"], True)
    assert "kubernetes_version" not in autoscaled["cluster"]
    assert parse(autoscaled).cluster.kubernetes_version in CLUSTER_AUTOSCALER_CHARTS  # the default plans
    assert schema_errors({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}) == []


def test_eks_calendar_is_fourteen_plus_twelve_months():
    from datetime import date

    from core.catalog import aws as catalog

    for v in catalog.EKS_CALENDAR.values():
        released, std, ext = (date.fromisoformat(d) for d in (v.released, v.end_of_standard, v.end_of_extended))
        assert 13 <= (std.year - released.year) * 12 + std.month - released.month <= 14, v
        assert (ext.year - std.year) * 12 + ext.month - std.month == 12, v
    assert catalog.eks_support("1.33", "2026-07-29") == "standard"
    assert catalog.eks_support("1.33", "2026-07-30") == "extended"
    assert catalog.eks_support("1.31", "2026-11-27") == "ended"


def test_extended_support_version_is_a_warning_with_its_cost():
    from infra.cluster.estimate import hourly_cost
    from infra.cluster.offerings import advisories

    cfg = parse(with_(["cluster", "kubernetes_version"], "1.33"))
    notes = advisories(cfg, today=TODAY)
    assert any(n.startswith('cluster.kubernetes_version="1.33": standard support ended on 2026-07-29') for n in notes)
    items = hourly_cost(cfg, nat_gateways=0, today=TODAY)
    assert items["EKS control plane (extended support for 1.33)"] == 0.60
    assert hourly_cost(parse(GOOD), nat_gateways=0, today=TODAY)["EKS control plane"] == 0.10


def test_eks_136_is_offered_with_its_approximate_dates_said():
    from infra.cluster.offerings import advisories

    assert "1.36" in catalog.EKS_VERSIONS
    cfg = parse(with_(["cluster", "kubernetes_version"], "1.36"))
    [note] = [n for n in advisories(cfg, today=TODAY) if "approximate" in n]
    assert note.startswith('cluster.kubernetes_version="1.36": its support dates are approximate (released about '
                           "2026-06-10")
    assert not [n for n in advisories(parse(GOOD), today=TODAY) if "approximate" in n]


def test_every_eks_version_names_its_al2023_kernel():
    # awslabs/amazon-eks-ami CHANGELOG.md, v20260714: kernel-6.18 for 1.36, 6.12 for 1.33-1.35, 6.1 for 1.30-1.32.
    assert {v: catalog.EKS_CALENDAR[v].al2023_kernel for v in ("1.32", "1.33", "1.35", "1.36")} == {
        "1.32": "6.1", "1.33": "6.12", "1.35": "6.12", "1.36": "6.18"}


@pytest.mark.parametrize("version, ami, warned", [
    ("1.35", "AL2023_x86_64_NVIDIA", "system, gpu_node_groups[0]"),
    ("1.36", "AL2023_x86_64_NVIDIA", "system, gpu_node_groups[0]"),
    ("1.36", "BOTTLEROCKET_x86_64_NVIDIA", "system"),
    ("1.32", "AL2023_x86_64_NVIDIA", None),
])
def test_fsx_on_a_kernel_without_a_known_lustre_client_is_warned(version, ami, warned):
    from infra.cluster.offerings import version_notes

    raw = with_(["cluster", "kubernetes_version"], version)
    raw["storage"] = {"kind": "fsx"}
    raw["gpu_node_groups"][0]["ami_type"] = ami
    notes = [n for n in version_notes(parse(raw, today="2026-11-22")) if "lustre-client" in n]
    if warned is None:
        assert notes == []
        return
    [note] = notes
    kernel = catalog.EKS_CALENDAR[version].al2023_kernel
    assert note.startswith(f'storage.kind="fsx" on cluster.kubernetes_version="{version}": the AL2023 nodes '
                           f"({warned}) run kernel {kernel}, for which no lustre-client package")
    efs = with_(["cluster", "kubernetes_version"], version)
    assert not [n for n in version_notes(parse(efs)) if "lustre-client" in n]


@pytest.mark.parametrize("group, expected", [
    ({"instance_type": "p5.48xlarge"}, None),
    ({"instance_type": "p5.48xlarge", "efa": True, "placement_group": False}, None),
    ({"instance_type": "p5.48xlarge", "capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": "cr-0123456789abcdef0",
      "availability_zone": "us-west-2b", "placement_group": True}, "gpu_node_groups[0].placement_group=true: a Capacity Block"),
])
def test_efa_placement_and_capacity_block_combinations(group, expected):
    raw = with_(["gpu_node_groups", 0], {"name": "gpu", "max_size": 2, **group})
    if expected is None:
        parse(raw)
    else:
        assert any(p.startswith(expected) for p in problems(raw)), problems(raw)


def test_efa_in_an_existing_vpc_needs_the_subnet_named():
    raw = with_(["gpu_node_groups", 0, "instance_type"], "p5.48xlarge")
    raw["network"] = {"existing": {"vpc_id": "vpc-0123456789abcdef0",
                                   "private_subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"]}}
    assert any(p.startswith("gpu_node_groups[0].subnet_id: is required with efa in an existing VPC")
               for p in problems(raw))
    raw["gpu_node_groups"][0]["subnet_id"] = "subnet-0aaaaaaaaaaaaaaa2"
    assert parse(raw).gpu_node_groups[0].subnet_id == "subnet-0aaaaaaaaaaaaaaa2"


def test_efa_region_without_a_known_registry_account_is_rejected():
    raw = with_(["gpu_node_groups", 0, "instance_type"], "p5.48xlarge")
    assert any(p.startswith('aws:region="me-central-1": the EFA device plugin') for p in problems(raw, "me-central-1"))
    from core.catalog.pins import efa_plugin_image
    assert efa_plugin_image("af-south-1").startswith("877085696533.dkr.ecr.af-south-1.")


def test_prepared_dataset_reads_from_the_home_stack_an_existing_bucket_or_datasets_uri():
    raw = with_(["experiments", 0, "dataset"], "tiny-imagenet-200")
    assert parse(raw).results.home_stack == "organization/eksbench/home"
    raw["results"] = {"bucket": "team-results"}
    parse(raw)
    raw["datasets_uri"] = "s3://team-datasets/datasets/"
    parse(raw)
    # datasets_uri alone is not enough: the results need a place this stack does not create.
    del raw["results"]
    assert [p.split(":")[0] for p in problems(raw)] == ["results.home_stack"]


def test_scalar_strings_are_not_turned_into_numbers():
    raw = with_(["cluster", "kubernetes_version"], "1.30")
    assert parse(raw, today="2026-01-01").cluster.kubernetes_version == "1.30"


@pytest.mark.parametrize("stack", sorted(p.name[7:-5] for p in ROOT.glob("Pulumi.*.yaml")))
def test_every_stack_file_parses(stack):
    raw, region = stack_raw_config(stack)
    if stack_role(raw) == "home":
        assert parse_config(raw, project="eksbench", stack=stack, region=region).stack == stack
        with pytest.raises(ConfigError) as e:  # not an experiment stack: bench run refuses it in one line
            load_stack_config(stack)
        assert e.value.problems[0].startswith('role="home": Pulumi.home.yaml is the home stack')
        return
    if stack in STACKS_TO_FILL_IN:
        with pytest.raises(ConfigError) as e:
            load_stack_config(stack)
        assert [p.split("=")[0].split(":")[0] for p in e.value.problems] == STACKS_TO_FILL_IN[stack]
        return
    assert load_stack_config(stack).stack == stack


# Example stacks shipped with placeholders the user must replace: the keys `bench plan` names.
STACKS_TO_FILL_IN = {"p5-fsx": ["cluster.public_access_cidrs[0]"]}


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


# ---- regions: under the mock engine any name would plan (invented zones, invented offers), so the offline
# plan refuses a region AWS does not have, by name, with the ones botocore's endpoint data knows.

def dev_in(region: str) -> dict:
    import copy

    from tests.program.test_program import DEV

    config = copy.deepcopy(DEV)
    config["aws:region"] = region
    config["eksbench:network"] = {k: v for k, v in config["eksbench:network"].items() if k != "azs"}
    return config


def test_an_unknown_region_is_refused_naming_it_and_the_known_ones():
    from program.offline import evaluate_config

    with pytest.raises(ConfigError) as e:
        evaluate_config("dev", dev_in("mars-east-1"))
    [line] = [p for p in e.value.problems if p.startswith("aws:region=")]
    assert line.startswith('aws:region="mars-east-1": is not an AWS region with EKS in botocore\'s endpoint data')
    assert "us-west-2" in line and "eu-central-1" in line and line.endswith('e.g. "us-west-2"')


def test_the_known_regions_are_botocores_and_a_real_one_plans():
    from program.cluster_checks import known_regions
    from program.offline import evaluate_config

    known = known_regions()
    assert {"us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1", "cn-north-1", "us-gov-west-1"} <= known
    assert "mars-east-1" not in known
    plan = evaluate_config("dev", dev_in("us-east-1"))
    assert plan.outputs["region"] == "us-east-1"

