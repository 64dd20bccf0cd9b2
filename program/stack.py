"""What one eksbench stack builds, top to bottom: ``build_stack(raw config) -> stack outputs``.

``__main__.py`` (what ``pulumi up`` runs) calls it with Pulumi's config, and ``bench plan``
calls it under the mock engine. The order is the contract: the shape of the config is
checked, the region's instance offerings are looked up, every meaning rule runs once
(``program.validation``), and only then is the first resource registered. A ConfigError
raised here carries every problem, typed, to whoever called. The results bucket is not built
here: it is the home stack's (``program.home``; ``export_stack`` builds that stack for
``eksbench:role: home``), read through a StackReference, or an existing bucket.

``build_stack`` reads as its steps, in the order they register resources: check, network, cluster
(the control plane, then the node groups), storage, identity, addons, experiments, outputs. Each
takes what it needs (``Given``: what every step reads; ``Cluster``: the cluster and its nodes)
and returns what the steps after it need.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pulumi
import pulumi_aws as aws

from core.catalog import aws as catalog
from core.config.fields import ConfigError
from core.config.model import GpuNodeGroup, HomeConfig, StackConfig
from core.config.overrides import select
from core.config.shape import parse_stack_config, stack_role
from core.contract.names import cluster_name
from core.contract.results_location import ResultsLocation
from datasets.dataset_staging import (
    DatasetStaging,
    DatasetStagingArgs,
    datasets_to_stage,
)
from infra.addons.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from infra.addons.device_plugins import DevicePlugins, DevicePluginsArgs
from infra.addons.etcd import Etcd, EtcdArgs
from infra.cluster import offerings
from infra.cluster.eks import EksCluster, EksClusterArgs
from infra.cluster.estimate import cost_after_autostop, hourly_cost, total, unpriced
from infra.cluster.node_group import (
    NodeGroup,
    NodeGroupArgs,
    gpu_node_group_spec,
    system_node_group_spec,
)
from infra.cluster.trainer_identity import TrainerIdentity, TrainerIdentityArgs
from infra.environment import Environment, environment_for
from infra.network.vpc import Network, NetworkArgs
from infra.storage.efs import EfsStorage, EfsStorageArgs
from infra.storage.fsx import FSX_EXPORT_PREFIX, FsxStorage, FsxStorageArgs, cross_zone_notes
from program.home import build_home, results_bucket_name
from program.image_checks import image_advisories
from program.validation import meaning_problems
from workloads.autostop_component import AutostopController, AutostopControllerArgs, autostop_owner
from workloads.autostop_manifests import autostop_generation
from workloads.code_files import read_code_files
from workloads.code_manifests import code_config_map_manifest
from workloads.experiment_suite_component import ExperimentSuite, ExperimentSuiteArgs


def cluster_name_for(cfg: StackConfig) -> str:
    return cluster_name(cfg.project, cfg.stack)


def lookup_offerings(cfg: StackConfig) -> tuple[dict[str, str], dict[str, set[str]]]:
    """The region's usable zones (name -> zone ID, without those EKS does not support), and for each
    GPU type (ours and the alternatives) the zones offering it."""
    found_zones = aws.get_availability_zones(state="available")
    zones = offerings.usable_zones(list(found_zones.names), list(found_zones.zone_ids))
    types = sorted({g.instance_type for g in cfg.gpu_node_groups} | set(catalog.GPU_ALTERNATIVES))
    found = aws.ec2.get_instance_type_offerings(
        location_type="availability-zone", filters=[{"name": "instance-type", "values": types}])
    offered: dict[str, set[str]] = {}
    for t, zone in zip(found.instance_types, found.locations):
        offered.setdefault(t, set()).add(zone)
    return zones, offered


@dataclass(frozen=True)
class Given:
    """What every step reads: the checked config, its environment, tags and cluster name, the region's zones
    and GPU offerings, the shipped sources and the clock."""
    cfg: StackConfig
    env: Environment
    tags: Mapping[str, str]
    name: str
    zones: Mapping[str, str]
    offered: Mapping[str, set[str]]
    code_files: Mapping[str, str]
    today: str


@dataclass(frozen=True)
class Cluster:
    """The cluster and its nodes: the control plane, the system group, the GPU groups (in the config's order),
    the single-zone groups given the zone chosen here (``placed``), the first GPU group's first subnet (FSx's)
    and autostop's generation ("" without autostop)."""
    eks: EksCluster
    system: NodeGroup
    gpu_groups: tuple[NodeGroup, ...]
    placed: Mapping[str, GpuNodeGroup]
    first_gpu_subnet: Any
    generation: str


def build_stack(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None,
                today: str | None = None, experiment: str | None = None) -> tuple[StackConfig, dict[str, Any]]:
    """Validate ``raw`` (the ``eksbench:*`` keys), register every resource; return the config and the outputs.

    ``today`` (ISO date) is the clock the EKS version calendar is read with; None reads the system clock here.
    ``experiment``: only that experiment is checked and gets Jobs (``eksbench run --experiment``); the cluster is
    the stack's whole."""
    given = check_stack(raw, project=project, stack=stack, region=region,
                        today=today or datetime.date.today().isoformat(), experiment=experiment)
    network = build_network(given)
    bucket = results_bucket_name(given.cfg)  # the home stack's, read (or an existing one): never created here
    cluster = build_cluster(given, network)
    storage = build_storage(given, network, cluster, bucket)
    identity = build_identity(given, cluster, bucket)
    etcd = build_addons(given, cluster)
    suite = build_experiments(given, cluster, bucket, workload_deps=[cluster.eks.namespace, identity, storage, etcd])
    return given.cfg, stack_outputs(given, network, cluster, storage, suite, bucket)


def check_stack(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None, today: str,
                experiment: str | None) -> Given:
    """Shape, the region's offerings, then every meaning rule (ConfigError with all problems); warn the advisories."""
    cfg = select(parse_stack_config(raw, project=project, stack=stack, region=region), experiment)
    zones, offered = lookup_offerings(cfg)
    code_files = read_code_files()
    problems = meaning_problems(cfg, offered=offered, code_files=code_files, today=today, zones=zones)
    if problems:
        raise ConfigError(problems)
    for note in offerings.advisories(cfg, today=today) + image_advisories(cfg, today):
        pulumi.log.warn(note)
    return Given(cfg=cfg, env=environment_for(cfg), name=cluster_name_for(cfg), zones=zones, offered=offered,
                 tags={"eksbench:project": cfg.project, "eksbench:stack": cfg.stack, **cfg.tags},
                 code_files=code_files, today=today)


def build_network(given: Given) -> Network:
    """The VPC (or the existing one) in the pinned zones, or in zones chosen from today's offerings."""
    cfg = given.cfg
    # Zones pinned in the stack file stay put; chosen ones follow live offerings, so an offering change
    # would re-plan the VPC: say which were chosen and how to pin them.
    if cfg.network.azs:
        azs = list(cfg.network.azs)
    else:
        azs = offerings.choose_azs(list(given.zones), given.offered, [g.instance_type for g in cfg.gpu_node_groups],
                                   cfg.network.az_count)
        if not cfg.network.existing_vpc_id:
            pulumi.log.warn(f"network.azs: not set, so this run chose {', '.join(azs)} from today's offerings; "
                            f"pin them so a later offering change cannot re-plan the VPC: add "
                            f"azs: {json.dumps(azs)} under eksbench:network in Pulumi.{cfg.stack}.yaml")
    return Network("network", NetworkArgs(config=cfg.network, cluster_name=given.name, region=cfg.region,
                                          azs=tuple(azs), tags=given.tags))


def build_cluster(given: Given, network: Network) -> Cluster:
    """The control plane, autostop's claim on the GPU groups' sizes, then the node groups."""
    cfg = given.cfg
    eks = EksCluster("cluster", EksClusterArgs(
        config=cfg.cluster, cluster_name=given.name, namespace=cfg.namespace, vpc_id=network.vpc_id,
        public_subnet_ids=network.public_subnet_ids, private_subnet_ids=network.private_subnet_ids, tags=given.tags))
    generation, owner = claim_for_autostop(given, eks)
    system = node_group(given, network, eks, "system",
                        system_node_group_spec(cfg.system_nodes, lustre_client=cfg.storage.kind == "fsx"),
                        network.private_subnet_ids)
    gpu_groups, placed, first_gpu_subnet = build_gpu_groups(given, network, eks, owner)
    return Cluster(eks=eks, system=system, gpu_groups=gpu_groups, placed=placed, first_gpu_subnet=first_gpu_subnet,
                   generation=generation)


def claim_for_autostop(given: Given, eks: EksCluster) -> tuple[str, tuple[pulumi.Resource, ...]]:
    """Autostop's generation and the resource recording it ("", () without autostop).

    It is recorded before the GPU groups get their sizes back (workloads.autostop_component.autostop_owner): a controller
    of an earlier run that is still running then stands down instead of scaling them to zero."""
    cfg = given.cfg
    if not cfg.autostop.enabled:
        return "", ()
    generation = autostop_generation(
        run_id=cfg.run_id, experiments=cfg.experiments, deadline_minutes=cfg.autostop_deadline_minutes,
        code_config_map=code_config_map_manifest(given.code_files, namespace=cfg.namespace)["metadata"]["name"],
        idle_minutes=cfg.autostop.idle_minutes)
    return generation, (autostop_owner("autostop-owner", namespace=cfg.namespace, generation=generation,
                                       run_id=cfg.run_id,
                                       opts=pulumi.ResourceOptions(provider=eks.provider, depends_on=[eks.namespace])),)


def node_group(given: Given, network: Network, eks: EksCluster, group_name: str, spec: Any, subnets: Any,
               after: Sequence[pulumi.Resource] = ()) -> NodeGroup:
    """One node group of the cluster, after ``after``. Nodes in private subnets reach ECR and the API through
    the NAT routes: it waits for the network (the group's own depends_on reaches its children through
    child_options)."""
    return NodeGroup(group_name, NodeGroupArgs(
        spec=spec, cluster_name=eks.ready_cluster_name, node_role=eks.node_role, subnet_ids=subnets,
        cluster_security_group_id=eks.node_security_group_id,
        node_role_policies=eks.node_role_policies, tags=given.tags),
        pulumi.ResourceOptions.merge(pulumi.ResourceOptions(depends_on=[network]),
                                     pulumi.ResourceOptions(depends_on=list(after))))


def build_gpu_groups(given: Given, network: Network, eks: EksCluster, owner: tuple[pulumi.Resource, ...],
                     ) -> tuple[tuple[NodeGroup, ...], dict[str, GpuNodeGroup], Any]:
    """The GPU node groups, each in its subnets; the single-zone groups given the zone chosen here (the Jobs
    tell their summaries), and the first group's first subnet."""
    cfg, lustre = given.cfg, given.cfg.storage.kind == "fsx"
    groups, placed, first_gpu_subnet, zones = [], {}, None, []
    for i, g in enumerate(cfg.gpu_node_groups):
        subnets, chosen, zones_i = gpu_group_subnets(given, network, i, g)
        zones += [(i, g.name, zones_i)] if zones_i else []
        if chosen is not None:
            placed[g.name] = chosen
        first_gpu_subnet = first_gpu_subnet or subnets[0]
        # An autoscaled group's size is Cluster Autoscaler's, never given back by Pulumi: no generation to wait for.
        groups.append(node_group(given, network, eks, f"gpu-{g.name}", gpu_node_group_spec(g, lustre_client=lustre),
                                 subnets, () if g.autoscale else owner))
    for note in cross_zone_notes(zones, list(network.azs)) if lustre and not cfg.network.existing_vpc_id else []:
        pulumi.log.warn(note)
    return tuple(groups), placed, first_gpu_subnet


def gpu_group_subnets(given: Given, network: Network, i: int,
                      g: GpuNodeGroup) -> tuple[list[Any], GpuNodeGroup | None, list[str]]:
    """The subnets of ``gpu_node_groups[i]``, the group with the zone chosen here where it must sit in one
    zone the stack file did not name (else None), and its zones ([] in an existing VPC, whose subnets' zones the
    program does not read); in a created VPC, warns which zones it got."""
    cfg = given.cfg
    one_zone = offerings.one_zone_reason(cfg, g)
    if cfg.network.existing_vpc_id:
        subnets = [g.subnet_id] if g.subnet_id else network.private_subnet_ids
        # Without subnet_id, a multi-node group takes the first private subnet (its zone is then read
        # from the pod's labels where the cluster copies them: workloads.train.harness.what_ran).
        return (subnets[:1] if one_zone else subnets), None, []
    if g.availability_zone and g.availability_zone not in network.azs:
        raise ConfigError([f"gpu_node_groups[{i}].availability_zone={json.dumps(g.availability_zone)}: is not "
                           f"among the network's zones ({', '.join(network.azs)}); pin network.azs to "
                           f"include it"])
    zones = [g.availability_zone] if g.availability_zone else offerings.group_azs(
        g.instance_type, network.azs, given.offered)
    zones = zones[:1] if one_zone else zones
    subnet_by_az = dict(zip(network.azs, network.private_subnet_ids))
    where = "its availability_zone" if g.availability_zone else f"the first zone offering {g.instance_type}"
    pulumi.log.warn(f"gpu_node_groups[{i}] ({g.name}): " + (
        f"one zone, {zones[0]} ({where}): {one_zone}" if one_zone else
        f"zones {', '.join(zones)}" + (f": {g.multi_zone_reason}" if g.multi_zone_reason else "")))
    chosen = dataclasses.replace(g, availability_zone=zones[0]) if one_zone and not g.availability_zone else None
    return [subnet_by_az[z] for z in zones], chosen, zones


def k8s_options(cluster: Cluster, depends_on: Sequence[Any] = ()) -> pulumi.ResourceOptions:
    """On the cluster's Kubernetes provider, after ``depends_on``."""
    return pulumi.ResourceOptions.merge(pulumi.ResourceOptions(provider=cluster.eks.provider),
                                        pulumi.ResourceOptions(depends_on=list(depends_on)))


def k8s_ready(cluster: Cluster) -> list[pulumi.Resource]:
    """What a workload on the cluster waits for: its namespace and the system nodes."""
    return [cluster.eks.namespace, cluster.system]


def build_storage(given: Given, network: Network, cluster: Cluster, bucket: pulumi.Output[str]) -> EfsStorage | FsxStorage:
    """The shared volume: EFS, or FSx for Lustre linked to the datasets and this stack's results in S3."""
    cfg, env, eks = given.cfg, given.env, cluster.eks
    k8s = k8s_options(cluster)
    if cfg.storage.kind == "efs":
        return EfsStorage("storage", EfsStorageArgs(
            config=cfg.storage.efs, env=env, cluster_name=given.name, vpc_id=network.vpc_id,
            subnet_ids=network.private_subnet_ids, node_security_group_id=eks.node_security_group_id,
            volume_depends_on=k8s_ready(cluster), tags=given.tags), k8s)
    stack_results = ResultsLocation(None, cfg.project, cfg.stack)
    return FsxStorage("storage", FsxStorageArgs(
        config=cfg.storage.fsx, env=env, cluster_name=given.name, vpc_id=network.vpc_id,
        subnet_id=cluster.first_gpu_subnet, node_security_group_id=eks.node_security_group_id,
        datasets_uri=bucket.apply(env.datasets_uri),
        # Not the launcher's keys: one writer per key (infra.storage.fsx).
        results_uri=bucket.apply(lambda b: stack_results.in_bucket(b).uri + FSX_EXPORT_PREFIX),
        volume_depends_on=k8s_ready(cluster), tags=given.tags), k8s)


def build_identity(given: Given, cluster: Cluster, bucket: pulumi.Output[str]) -> TrainerIdentity:
    """The trainers' identity (Pod Identity): this stack's results prefix in the bucket, and the datasets."""
    return TrainerIdentity("trainer", TrainerIdentityArgs(
        env=given.env, cluster_name=given.name, bucket=bucket,
        stack_prefix=ResultsLocation(None, given.cfg.project, given.cfg.stack).prefix, tags=given.tags),
        k8s_options(cluster, [cluster.eks.namespace, cluster.eks.pod_identity_agent]))


def build_addons(given: Given, cluster: Cluster) -> Etcd:
    """etcd for rendezvous; the device plugins the GPU groups' AMIs lack, and Cluster Autoscaler where a group
    opts in. Returns etcd, which the workloads wait for."""
    cfg, eks = given.cfg, cluster.eks
    etcd = Etcd("etcd", EtcdArgs(env=given.env), k8s_options(cluster, k8s_ready(cluster)))
    nvidia_groups = tuple(g.name for g in cfg.gpu_node_groups
                          if g.ami_type not in catalog.AMI_TYPES_WITH_DEVICE_PLUGIN)
    efa_groups = tuple(g.name for g in cfg.gpu_node_groups if g.efa)
    if nvidia_groups or efa_groups:
        DevicePlugins("device-plugins", DevicePluginsArgs(nvidia_groups=nvidia_groups, efa_groups=efa_groups,
                                                          region=cfg.region),
                      k8s_options(cluster, [eks.namespace]))
    if any(g.autoscale for g in cfg.gpu_node_groups):
        ClusterAutoscaler("autoscaler", ClusterAutoscalerArgs(
            cluster_name=given.name, cluster_arn=eks.cluster_arn, region=cfg.region,
            kubernetes_version=cfg.cluster.kubernetes_version, tags=given.tags),
            k8s_options(cluster, [eks.pod_identity_agent, cluster.system]))
    return etcd


def build_experiments(given: Given, cluster: Cluster, bucket: pulumi.Output[str], *,
                      workload_deps: list[Any]) -> ExperimentSuite:
    """The datasets staged onto the shared volume, then the experiments' Jobs, then the autostop controller."""
    cfg, env = given.cfg, given.env
    staging = DatasetStaging("staging", DatasetStagingArgs(datasets=datasets_to_stage(cfg.experiments),
                                                           storage_kind=cfg.storage.kind, preload=cfg.storage.preload,
                                                           region=cfg.region, env=env,
                                                           source_uri=bucket.apply(env.datasets_uri)),
                             k8s_options(cluster, workload_deps))
    suite = ExperimentSuite("experiments",
                            ExperimentSuiteArgs(experiments=cfg.experiments,
                                                node_groups={**cfg.node_groups, **cluster.placed},
                                                execution=cfg.execution, run_id=cfg.run_id, region=cfg.region,
                                                env=env, bucket=bucket, code_files=given.code_files),
                            k8s_options(cluster, [*workload_deps, staging]))
    if cfg.autostop.enabled:
        build_autostop(given, cluster, bucket, suite)
    return suite


def build_autostop(given: Given, cluster: Cluster, bucket: pulumi.Output[str], suite: ExperimentSuite) -> None:
    """The autostop controller: on the system nodes, after the Jobs exist; it scales the GPU groups to zero once
    they are done."""
    cfg, eks = given.cfg, cluster.eks
    scaled_here = [(ng, g) for ng, g in zip(cluster.gpu_groups, cfg.gpu_node_groups) if not g.autoscale]
    AutostopController("autostop", AutostopControllerArgs(
        namespace=cfg.namespace, run_id=cfg.run_id, region=cfg.region, cluster_name=given.name,
        # Autoscaled groups' sizes are Cluster Autoscaler's: autostop leaves them alone.
        cluster_arn=eks.cluster_arn, node_groups=[ng.node_group_name for ng, _ in scaled_here],
        bucket=bucket, results=given.env.results, deadline_minutes=cfg.autostop_deadline_minutes,
        idle_minutes=cfg.autostop.idle_minutes, code_files=given.code_files, generation=cluster.generation,
        node_group_sizes=[{"minSize": g.min_size, "maxSize": g.max_size, "desiredSize": g.desired_size}
                          for _, g in scaled_here],
        # ... and suspends the run's unfinished Jobs instead, so the autoscaler can take their nodes away.
        suspend_at_deadline=any(g.autoscale for g in cfg.gpu_node_groups), tags=given.tags, after=(suite,)),
        k8s_options(cluster, [eks.namespace, eks.pod_identity_agent, cluster.system]))


def stack_outputs(given: Given, network: Network, cluster: Cluster, storage: EfsStorage | FsxStorage,
                  suite: ExperimentSuite, bucket: pulumi.Output[str]) -> dict[str, Any]:
    """The stack's outputs, with its hourly cost; warns when the stack bills for nodes and runs no experiment."""
    cfg, env = given.cfg, given.env
    cost = hourly_cost(cfg, nat_gateways=network.nat_gateway_count, today=given.today)
    if not cfg.experiments:
        hourly = total(cost)
        bill = f"about ${hourly:.2f}/h" if hourly is not None else f"by the hour ({'; '.join(unpriced(cfg))})"
        pulumi.log.warn(f"experiments=[]: the stack runs no experiment, yet its nodes and control plane bill {bill}; "
                        "add experiments, or set the GPU groups' desired_size to 0")
    return {
        "cluster_name": given.name,
        "region": cfg.region,
        "kubeconfig": cluster.eks.kubeconfig,
        "results_bucket": bucket,
        "results_prefix": bucket.apply(lambda b: env.results.in_bucket(b).uri),
        "experiment_results": suite.results_uris,
        "dataset_uri": bucket.apply(env.datasets_uri),
        "storage_kind": cfg.storage.kind,
        "storage_id": storage.file_system_id,
        "mount_path": env.mount_path,
        "node_groups": [cluster.system.node_group_name, *[g.node_group_name for g in cluster.gpu_groups]],
        "estimated_hourly_cost_usd": total(cost),
        "hourly_cost_after_autostop_usd": cost_after_autostop(cost),
    }


def export_stack(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None,
                 today: str | None = None, experiment: str | None = None) -> StackConfig | HomeConfig:
    """``build_stack`` (or, for ``eksbench:role: home``, ``program.home.build_home``) and export each
    output (what both ``__main__.py`` and ``bench plan`` run); ``experiment``: build only that one's Jobs."""
    if stack_role(raw) == "home":
        cfg, outputs = build_home(raw, project=project, stack=stack, region=region)
    else:
        cfg, outputs = build_stack(raw, project=project, stack=stack, region=region, today=today,
                                   experiment=experiment)
    for key, value in outputs.items():
        pulumi.export(key, value)
    return cfg
