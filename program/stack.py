"""What one eksbench stack builds, top to bottom: ``build_stack(raw config) -> stack outputs``.

``__main__.py`` (what ``pulumi up`` runs) calls it with Pulumi's config, and ``bench plan``
calls it under the mock engine. The order is the contract: the shape of the config is
checked, the region's instance offerings are looked up, every meaning rule runs once
(``program.validation``), and only then is the first resource registered. A ConfigError
raised here carries every problem, typed, to whoever called. The results bucket is not built
here: it is the home stack's (``program.home``; ``export_stack`` builds that stack for
``eksbench:role: home``), read through a StackReference, or an existing bucket.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any, Mapping

import pulumi
import pulumi_aws as aws

from core.catalog import aws as catalog
from core.config.fields import ConfigError
from core.config.model import HomeConfig, StackConfig
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
from infra.environment import environment_for
from infra.network.vpc import Network, NetworkArgs
from infra.storage.efs import EfsStorage, EfsStorageArgs
from infra.storage.fsx import FSX_EXPORT_PREFIX, FsxStorage, FsxStorageArgs
from program.home import build_home, results_bucket_name
from program.validation import image_advisories, meaning_problems
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


def build_stack(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None,
                today: str | None = None, experiment: str | None = None) -> tuple[StackConfig, dict[str, Any]]:
    """Validate ``raw`` (the ``eksbench:*`` keys), register every resource; return the config and the outputs.

    ``today`` (ISO date) is the clock the EKS version calendar is read with; None reads the system clock here.
    ``experiment``: only that experiment is checked and gets Jobs (``eksbench run --experiment``); the cluster is
    the stack's whole."""
    today = today or datetime.date.today().isoformat()
    cfg = select(parse_stack_config(raw, project=project, stack=stack, region=region), experiment)
    zones, offered = lookup_offerings(cfg)
    code_files = read_code_files()
    problems = meaning_problems(cfg, offered=offered, code_files=code_files, today=today, zones=zones)
    if problems:
        raise ConfigError(problems)
    for note in offerings.advisories(cfg, today=today) + image_advisories(cfg, today):
        pulumi.log.warn(note)

    env = environment_for(cfg)
    tags = {"eksbench:project": cfg.project, "eksbench:stack": cfg.stack, **cfg.tags}
    name = cluster_name_for(cfg)
    # Zones pinned in the stack file stay put; chosen ones follow live offerings, so an offering change
    # would re-plan the VPC: say which were chosen and how to pin them.
    if cfg.network.azs:
        azs = list(cfg.network.azs)
    else:
        azs = offerings.choose_azs(list(zones), offered, [g.instance_type for g in cfg.gpu_node_groups],
                                   cfg.network.az_count)
        if not cfg.network.existing_vpc_id:
            pulumi.log.warn(f"network.azs: not set, so this run chose {', '.join(azs)} from today's offerings; "
                            f"pin them so a later offering change cannot re-plan the VPC: add "
                            f"azs: {json.dumps(azs)} under eksbench:network in Pulumi.{stack}.yaml")

    # Network, the results bucket (the home stack's, read; or an existing one: never created here) and the cluster.
    network = Network("network", NetworkArgs(config=cfg.network, cluster_name=name, region=cfg.region,
                                             azs=tuple(azs), tags=tags))
    results_bucket = results_bucket_name(cfg)
    cluster = EksCluster("cluster", EksClusterArgs(
        config=cfg.cluster, cluster_name=name, namespace=cfg.namespace, vpc_id=network.vpc_id,
        public_subnet_ids=network.public_subnet_ids, private_subnet_ids=network.private_subnet_ids, tags=tags))

    # Node groups. Nodes in private subnets reach ECR and the API through the NAT routes: wait for the network.
    # The group's own depends_on reaches its children through child_options.
    after_network = pulumi.ResourceOptions(depends_on=[network])
    lustre = cfg.storage.kind == "fsx"

    def node_group(group_name: str, spec, subnets, after=()) -> NodeGroup:
        return NodeGroup(group_name, NodeGroupArgs(
            spec=spec, cluster_name=cluster.ready_cluster_name, node_role=cluster.node_role, subnet_ids=subnets,
            cluster_security_group_id=cluster.node_security_group_id,
            node_role_policies=cluster.node_role_policies, tags=tags),
            pulumi.ResourceOptions.merge(after_network, pulumi.ResourceOptions(depends_on=list(after))))

    # Autostop's generation is recorded before the GPU groups get their sizes back (workloads.autostop_component.autostop_owner):
    # a controller of an earlier run that is still running then stands down instead of scaling them to zero.
    generation, owner = "", ()
    if cfg.autostop.enabled:
        generation = autostop_generation(
            run_id=cfg.run_id, experiments=cfg.experiments, deadline_minutes=cfg.autostop_deadline_minutes,
            code_config_map=code_config_map_manifest(code_files, namespace=cfg.namespace)["metadata"]["name"],
            idle_minutes=cfg.autostop.idle_minutes)
        owner = (autostop_owner("autostop-owner", namespace=cfg.namespace, generation=generation, run_id=cfg.run_id,
                                opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[cluster.namespace])),)

    system = node_group("system", system_node_group_spec(cfg.system_nodes, lustre_client=lustre),
                        network.private_subnet_ids)
    subnet_by_az = dict(zip(network.azs, network.private_subnet_ids))
    gpu_groups, first_gpu_subnet = [], None
    placed: dict[str, Any] = {}  # single-zone groups with the zone chosen here: the Jobs tell their summaries
    for i, g in enumerate(cfg.gpu_node_groups):
        one_zone = offerings.one_zone_reason(cfg, g)
        if cfg.network.existing_vpc_id:
            subnets = [g.subnet_id] if g.subnet_id else network.private_subnet_ids
            # Without subnet_id, a multi-node group takes the first private subnet (its zone is then read
            # from the pod's labels where the cluster copies them: workloads.train.harness.what_ran).
            subnets = subnets[:1] if one_zone else subnets
        else:
            if g.availability_zone and g.availability_zone not in network.azs:
                raise ConfigError([f"gpu_node_groups[{i}].availability_zone={json.dumps(g.availability_zone)}: is not "
                                   f"among the network's zones ({', '.join(network.azs)}); pin network.azs to "
                                   f"include it"])
            zones = [g.availability_zone] if g.availability_zone else offerings.group_azs(
                g.instance_type, network.azs, offered)
            zones = zones[:1] if one_zone else zones
            subnets = [subnet_by_az[z] for z in zones]
            if one_zone and not g.availability_zone:
                placed[g.name] = dataclasses.replace(g, availability_zone=zones[0])
            where = "its availability_zone" if g.availability_zone else f"the first zone offering {g.instance_type}"
            pulumi.log.warn(f"gpu_node_groups[{i}] ({g.name}): " + (
                f"one zone, {zones[0]} ({where}): {one_zone}" if one_zone else
                f"zones {', '.join(zones)}" + (f": {g.multi_zone_reason}" if g.multi_zone_reason else "")))
        first_gpu_subnet = first_gpu_subnet or subnets[0]
        # An autoscaled group's size is Cluster Autoscaler's, never given back by Pulumi: no generation to wait for.
        gpu_groups.append(node_group(f"gpu-{g.name}", gpu_node_group_spec(g, lustre_client=lustre), subnets,
                                     () if g.autoscale else owner))

    # Shared storage, the trainer's identity, etcd and the device plugins, all on the cluster's provider.
    k8s = pulumi.ResourceOptions(provider=cluster.provider)
    k8s_ready = [cluster.namespace, system]
    dataset_uri = results_bucket.apply(env.datasets_uri)
    stack_results = ResultsLocation(None, cfg.project, cfg.stack)
    stack_prefix = stack_results.prefix
    if cfg.storage.kind == "efs":
        storage = EfsStorage("storage", EfsStorageArgs(
            config=cfg.storage.efs, env=env, cluster_name=name, vpc_id=network.vpc_id,
            subnet_ids=network.private_subnet_ids, node_security_group_id=cluster.node_security_group_id,
            volume_depends_on=k8s_ready, tags=tags), k8s)
    else:
        storage = FsxStorage("storage", FsxStorageArgs(
            config=cfg.storage.fsx, env=env, cluster_name=name, vpc_id=network.vpc_id, subnet_id=first_gpu_subnet,
            node_security_group_id=cluster.node_security_group_id, datasets_uri=dataset_uri,
            # Not the launcher's keys: one writer per key (infra.storage.fsx).
            results_uri=results_bucket.apply(lambda b: stack_results.in_bucket(b).uri + FSX_EXPORT_PREFIX),
            volume_depends_on=k8s_ready, tags=tags), k8s)
    identity = TrainerIdentity("trainer", TrainerIdentityArgs(
        env=env, cluster_name=name, bucket=results_bucket, stack_prefix=stack_prefix, tags=tags),
        pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(
            depends_on=[cluster.namespace, cluster.pod_identity_agent])))
    etcd = Etcd("etcd", EtcdArgs(env=env), pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(
        depends_on=k8s_ready)))
    nvidia_groups = tuple(g.name for g in cfg.gpu_node_groups
                          if g.ami_type not in catalog.AMI_TYPES_WITH_DEVICE_PLUGIN)
    efa_groups = tuple(g.name for g in cfg.gpu_node_groups if g.efa)
    if nvidia_groups or efa_groups:
        DevicePlugins("device-plugins", DevicePluginsArgs(nvidia_groups=nvidia_groups, efa_groups=efa_groups,
                                                          region=cfg.region),
                      pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[cluster.namespace])))

    if any(g.autoscale for g in cfg.gpu_node_groups):
        ClusterAutoscaler("autoscaler", ClusterAutoscalerArgs(
            cluster_name=name, cluster_arn=cluster.cluster_arn, region=cfg.region,
            kubernetes_version=cfg.cluster.kubernetes_version, tags=tags),
            pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[cluster.pod_identity_agent, system])))

    # Datasets staged onto the shared volume, then the experiments.
    workload_deps = [cluster.namespace, identity, storage, etcd]
    staging = DatasetStaging("staging", DatasetStagingArgs(datasets=datasets_to_stage(cfg.experiments),
                                                           storage_kind=cfg.storage.kind, preload=cfg.storage.preload,
                                                           region=cfg.region, env=env, source_uri=dataset_uri),
                             pulumi.ResourceOptions(provider=cluster.provider, depends_on=workload_deps))
    suite = ExperimentSuite("experiments",
                            ExperimentSuiteArgs(experiments=cfg.experiments, node_groups={**cfg.node_groups, **placed},
                                                execution=cfg.execution, run_id=cfg.run_id, region=cfg.region,
                                                env=env, bucket=results_bucket, code_files=code_files),
                            pulumi.ResourceOptions(provider=cluster.provider, depends_on=[*workload_deps, staging]))

    if cfg.autostop.enabled:
        # On the system nodes, after the Jobs exist; it scales the GPU groups to zero once they are done.
        AutostopController("autostop", AutostopControllerArgs(
            namespace=cfg.namespace, run_id=cfg.run_id, region=cfg.region, cluster_name=name,
            # Autoscaled groups' sizes are Cluster Autoscaler's: autostop leaves them alone.
            cluster_arn=cluster.cluster_arn,
            node_groups=[ng.node_group_name for ng, g in zip(gpu_groups, cfg.gpu_node_groups) if not g.autoscale],
            bucket=results_bucket, results=env.results, deadline_minutes=cfg.autostop_deadline_minutes,
            idle_minutes=cfg.autostop.idle_minutes, code_files=code_files, generation=generation,
            node_group_sizes=[{"minSize": g.min_size, "maxSize": g.max_size, "desiredSize": g.desired_size}
                              for g in cfg.gpu_node_groups if not g.autoscale],
            # ... and suspends the run's unfinished Jobs instead, so the autoscaler can take their nodes away.
            suspend_at_deadline=any(g.autoscale for g in cfg.gpu_node_groups), tags=tags),
            pulumi.ResourceOptions(provider=cluster.provider,
                                   depends_on=[cluster.namespace, cluster.pod_identity_agent, system, suite]))

    cost = hourly_cost(cfg, nat_gateways=network.nat_gateway_count, today=today)
    if not cfg.experiments:
        hourly = total(cost)
        bill = f"about ${hourly:.2f}/h" if hourly is not None else f"by the hour ({'; '.join(unpriced(cfg))})"
        pulumi.log.warn(f"experiments=[]: the stack runs no experiment, yet its nodes and control plane bill {bill}; "
                        "add experiments, or set the GPU groups' desired_size to 0")
    return cfg, {
        "cluster_name": name,
        "region": cfg.region,
        "kubeconfig": cluster.kubeconfig,
        "results_bucket": results_bucket,
        "results_prefix": results_bucket.apply(lambda b: env.results.in_bucket(b).uri),
        "experiment_results": suite.results_uris,
        "dataset_uri": dataset_uri,
        "storage_kind": cfg.storage.kind,
        "storage_id": storage.file_system_id,
        "mount_path": env.mount_path,
        "node_groups": [system.node_group_name, *[g.node_group_name for g in gpu_groups]],
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
