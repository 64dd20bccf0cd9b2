"""The eksbench Pulumi program: validate, then register the whole environment.

``__main__.py`` (what ``pulumi up`` runs) and ``bench plan`` (the same program under
the mock engine) both call ``run``. Order matters: every check, including those that
need AWS lookups (instance offerings), happens before the first resource is registered.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from datasets.dataset_staging import DatasetStaging, DatasetStagingArgs
from infra import offerings
from infra.device_plugins import DevicePlugins
from infra.efs_storage import EfsStorage
from infra.eks_cluster import EksCluster
from infra.environment import environment_for
from infra.estimate import hourly_cost
from infra.etcd import Etcd
from infra.fsx_storage import FsxStorage
from infra.network import Network
from infra.node_group import NodeGroup, gpu_node_group_args, system_node_group_args
from infra.results_bucket import ResultsBucket
from infra.trainer_identity import TrainerIdentity
from spec import aws_catalog as catalog
from spec.config import StackConfig
from spec.fields import ConfigError
from workloads import contracts
from workloads.experiment_suite import (
    ExperimentSuite,
    ExperimentSuiteArgs,
    read_code_files,
)


def cluster_name_for(cfg: StackConfig) -> str:
    return f"{cfg.project}-{cfg.stack}"[:100]


def lookup_offerings(cfg: StackConfig) -> tuple[list[str], dict[str, set[str]]]:
    """The region's zones, and for each GPU type (ours and the alternatives) the zones offering it."""
    zones = aws.get_availability_zones(state="available").names
    types = sorted({g.instance_type for g in cfg.gpu_node_groups} | set(catalog.GPU_ALTERNATIVES))
    found = aws.ec2.get_instance_type_offerings(
        location_type="availability-zone", filters=[{"name": "instance-type", "values": types}])
    offered: dict[str, set[str]] = {}
    for t, zone in zip(found.instance_types, found.locations):
        offered.setdefault(t, set()).add(zone)
    return list(zones), offered


def validate(cfg: StackConfig, offered: dict[str, set[str]], code_files: dict[str, str]) -> None:
    problems = offerings.offering_problems(cfg, offered)
    problems += [f"experiments[{i}].{p}" for i, e in enumerate(cfg.experiments) for p in contracts.check_experiment(e)]
    problems += contracts.missing_entry_points(cfg.experiments, code_files)
    if problems:
        raise ConfigError(problems)


def run(cfg: StackConfig) -> dict[str, Any]:
    """Register every resource of the stack; return the stack outputs."""
    region_azs, offered = lookup_offerings(cfg)
    code_files = read_code_files()
    validate(cfg, offered, code_files)
    for note in offerings.advisories(cfg):
        pulumi.log.warn(note)

    env = environment_for(cfg)
    tags = {"eksbench:project": cfg.project, "eksbench:stack": cfg.stack, **cfg.tags}
    name = cluster_name_for(cfg)
    gpu_types = [g.instance_type for g in cfg.gpu_node_groups]
    azs = offerings.choose_azs(region_azs, offered, gpu_types, cfg.network.az_count)
    network = Network("network", cfg.network, cluster_name=name, region=cfg.region, azs=azs, tags=tags)
    bucket = ResultsBucket("results", existing=cfg.results.bucket, stack=cfg.stack, tags=tags)
    cluster = EksCluster("cluster", cfg.cluster, cluster_name=name, namespace=cfg.namespace, vpc_id=network.vpc_id,
                         public_subnet_ids=network.public_subnet_ids, private_subnet_ids=network.private_subnet_ids,
                         tags=tags)
    # Nodes in private subnets reach ECR and the API through the NAT routes: wait for the network.
    common = dict(cluster=cluster.cluster, cluster_name=name, node_role=cluster.node_role, tags=tags,
                  opts=pulumi.ResourceOptions(depends_on=[network]))
    system = NodeGroup("system", system_node_group_args(cfg.system_nodes), subnet_ids=network.private_subnet_ids,
                       **common)
    subnet_by_az = dict(zip(network.azs, network.private_subnet_ids))
    gpu_groups, first_gpu_subnet = [], None
    for g in cfg.gpu_node_groups:
        zones = offerings.group_azs(g.instance_type, network.azs, offered) if not cfg.network.existing_vpc_id else []
        # A cluster placement group lives in one AZ, so the group does too.
        zones = zones[:1] if g.placement_group else zones
        subnets = [subnet_by_az[z] for z in zones] or network.private_subnet_ids
        first_gpu_subnet = first_gpu_subnet or subnets[0]
        gpu_groups.append(NodeGroup(f"gpu-{g.name}", gpu_node_group_args(g, placement_az=zones[0] if zones else None),
                                    subnet_ids=subnets, **common))

    provider = cluster.provider
    k8s_ready = [cluster.namespace, system]
    dataset_uri = bucket.bucket_name.apply(env.datasets_uri)
    stack_prefix = f"{cfg.project}/{cfg.stack}/"
    if cfg.storage.kind == "efs":
        storage = EfsStorage("storage", cfg.storage.efs, env=env, cluster_name=name, vpc_id=network.vpc_id,
                             private_subnet_ids=network.private_subnet_ids,
                             node_security_group_id=cluster.cluster_security_group_id, provider=provider,
                             addon_depends_on=[system], tags=tags, opts=pulumi.ResourceOptions(depends_on=k8s_ready))
    else:
        storage = FsxStorage("storage", cfg.storage.fsx, env=env, cluster_name=name, vpc_id=network.vpc_id,
                             subnet_id=first_gpu_subnet, node_security_group_id=cluster.cluster_security_group_id,
                             datasets_uri=dataset_uri,
                             results_uri=bucket.bucket_name.apply(lambda b: f"s3://{b}/{stack_prefix}"),
                             provider=provider, addon_depends_on=[system], tags=tags,
                             opts=pulumi.ResourceOptions(depends_on=k8s_ready))
    identity = TrainerIdentity("trainer", env=env, cluster_name=name, bucket=bucket.bucket_name,
                               stack_prefix=stack_prefix, provider=provider,
                               depends_on=[cluster.namespace, cluster.pod_identity_agent], tags=tags)
    etcd = Etcd("etcd", env=env, provider=provider, depends_on=k8s_ready)
    nvidia_groups = [g.name for g in cfg.gpu_node_groups if g.ami_type not in catalog.AMI_TYPES_WITH_DEVICE_PLUGIN]
    efa_groups = [g.name for g in cfg.gpu_node_groups if g.efa]
    if nvidia_groups or efa_groups:
        DevicePlugins("device-plugins", nvidia_groups=nvidia_groups, efa_groups=efa_groups, region=cfg.region,
                      provider=provider, depends_on=[cluster.namespace])
    workload_deps = [cluster.namespace, identity, storage, etcd]
    staging = DatasetStaging("staging", DatasetStagingArgs(config=cfg, env=env, bucket=bucket.bucket_name),
                             pulumi.ResourceOptions(provider=provider, depends_on=workload_deps))
    suite = ExperimentSuite("experiments",
                            ExperimentSuiteArgs(experiments=cfg.experiments,
                                                node_groups={g.name: g for g in cfg.gpu_node_groups},
                                                execution=cfg.execution, run_id=cfg.run_id, region=cfg.region,
                                                env=env, bucket=bucket.bucket_name, code_files=code_files),
                            pulumi.ResourceOptions(provider=provider, depends_on=[*workload_deps, staging]))

    cost = hourly_cost(cfg, nat_gateways=network.nat_gateway_count)
    return {
        "cluster_name": name,
        "region": cfg.region,
        "kubeconfig": cluster.kubeconfig,
        "results_bucket": bucket.bucket_name,
        "results_prefix": bucket.bucket_name.apply(lambda b: f"s3://{b}/{env.results_prefix}"),
        "experiment_results": suite.results_uris,
        "dataset_uri": dataset_uri,
        "storage_kind": cfg.storage.kind,
        "storage_id": storage.file_system_id,
        "mount_path": env.mount_path,
        "node_groups": [system.node_group_name, *[g.node_group_name for g in gpu_groups]],
        "estimated_hourly_cost_usd": round(sum(cost.values()), 2),
    }
