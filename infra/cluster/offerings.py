"""Checks the config against what the region offers, and advises on costly choices.

``offering_problems`` is the second validation stage (meaning, after schema): given the
instance-type offerings the program looked up, it names each GPU type the region does
not offer and the alternatives it does (AWS is retiring P3). ``choose_azs`` prefers
zones that offer the GPU types. ``advisories`` are warnings, not errors.
"""

from __future__ import annotations

from typing import Mapping

from core.catalog import aws as catalog
from core.catalog import compat
from core.catalog.pins import DEFAULT_EKS_VERSION
from core.config.fields import show
from core.config.model import GpuNodeGroup, StackConfig
from infra.cluster.autoscaling import SCALE_DOWN_IDLE
from infra.cluster.estimate import DURATIONS, image_pull_minutes


def offering_problems(cfg: StackConfig, offered: Mapping[str, set[str]]) -> list[str]:
    problems = []
    for i, g in enumerate(cfg.gpu_node_groups):
        if offered.get(g.instance_type):
            continue
        here = [t for t in catalog.GPU_ALTERNATIVES if offered.get(t)]
        note = " (AWS is retiring P3)" if catalog.INSTANCE_TYPES[g.instance_type].retiring else ""
        problems.append(
            f"gpu_node_groups[{i}].instance_type={show(g.instance_type)}: not offered in {cfg.region}{note}; "
            f"offered there: {', '.join(here) or 'none of ' + ', '.join(catalog.GPU_ALTERNATIVES)}"
            + (f", e.g. {show(here[0])}" if here else ""))
    return problems


# Zones where EKS does not place a cluster, by zone ID (zone names are shuffled per account, IDs
# are not): use1-az3 (us-east-1), usw1-az2 (us-west-1), cac1-az3 (ca-central-1). Source: the EKS
# user guide's subnet requirements ("View Amazon EKS networking requirements for VPC and subnets"),
# as quoted in the project's "Ready for a real AWS account" issue; a subnet there fails cluster
# creation with UnsupportedAvailabilityZoneException (EKS API reference).
EKS_UNSUPPORTED_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})


def usable_zones(names: list[str], zone_ids: list[str]) -> dict[str, str]:
    """Zone name -> zone ID, in region order, without the zones EKS does not support."""
    return {n: z for n, z in zip(names, zone_ids) if z not in EKS_UNSUPPORTED_ZONE_IDS}


def choose_azs(region_azs: list[str], offered: Mapping[str, set[str]], gpu_types: list[str], count: int) -> list[str]:
    """``count`` zones (at least two), those offering the most GPU types first, region order kept."""
    score = {az: sum(az in offered.get(t, set()) for t in gpu_types) for az in region_azs}
    ranked = sorted(region_azs, key=lambda az: -score[az])[:max(2, count)]
    return [az for az in region_azs if az in ranked]


def group_azs(instance_type: str, azs: list[str], offered: Mapping[str, set[str]]) -> list[str]:
    """The chosen zones where this type is offered (all of them when offerings are unknown)."""
    return [az for az in azs if az in offered.get(instance_type, set(azs))] or list(azs)


def one_zone_reason(cfg: StackConfig, group: GpuNodeGroup) -> str | None:
    """Why ``group`` must sit in one zone, or None where it may span the stack's zones.

    EFA traffic stays in one zone, a cluster placement group lives in one, and a Capacity Block
    serves one. A group that runs an experiment on several nodes sits in one too: an Auto Scaling
    group keeps its zones balanced ("Availability Zone distribution", EC2 Auto Scaling user guide),
    so two nodes land in two zones and the benchmark measures cross-zone latency and pays for
    cross-zone traffic; and a managed node group rebalances zones by draining nodes
    (aws/containers-roadmap#1453), which can evict a pod mid-run. ``multi_zone_reason`` lifts
    only this last rule."""
    if group.efa:
        return "EFA traffic stays in one zone"
    if group.placement_group:
        return "a cluster placement group lives in one zone"
    if group.capacity_type == "CAPACITY_BLOCK":
        return "a Capacity Block serves one zone"
    several = [e.name for e in cfg.experiments if e.max_nodes > 1 and cfg.node_group_for(e).name == group.name]
    if several and not group.multi_zone_reason:
        return (f"{', '.join(dict.fromkeys(several))} run on several nodes, which must not cross zones "
                f"(set multi_zone_reason on the group to allow several)")
    return None


def advisories(cfg: StackConfig, *, today: str) -> list[str]:
    """Warnings, not errors. ``today`` (ISO date) is the caller's clock, for the EKS version calendar."""
    notes = []
    for i, g in enumerate(cfg.gpu_node_groups):
        if catalog.INSTANCE_TYPES[g.instance_type].retiring:
            notes.append(f"gpu_node_groups[{i}].instance_type={show(g.instance_type)}: AWS is retiring P3 and some "
                         f"regions no longer offer it; alternatives: {', '.join(catalog.GPU_ALTERNATIVES)}")
        if g.min_size > 0:
            notes.append(f"gpu_node_groups[{i}].min_size={g.min_size}: GPU nodes bill while idle; 0 lets them scale "
                         "to zero between runs")
        if g.efa and not g.placement_group:
            notes.append(f"gpu_node_groups[{i}].placement_group=false: EFA nodes outside a cluster placement group "
                         "get lower and less even all-reduce bandwidth; \"auto\" puts them in one")
    if "0.0.0.0/0" in (cfg.cluster.public_access_cidrs or ()):
        notes.append('cluster.public_access_cidrs=["0.0.0.0/0"]: the API endpoint is reachable from anywhere '
                     '(still behind IAM authentication); restrict it to your own addresses, e.g. ["<your IP>/32"]')
    if cfg.cluster.public_access_cidrs == ():
        notes.append("cluster.public_access_cidrs=[]: private endpoint only; pulumi up must run from inside the VPC "
                     "(or over a VPN/peering into it), or its Kubernetes resources cannot be created")
    notes += scaled_from_zero_notes(cfg)
    version = cfg.cluster.kubernetes_version
    if catalog.eks_support(version, today) == "extended":
        v = catalog.EKS_CALENDAR[version]
        notes.append(f"cluster.kubernetes_version={show(version)}: standard support ended on {v.end_of_standard}; "
                     f"extended support costs ${catalog.EKS_EXTENDED_SUPPORT_USD_PER_HOUR:.2f}/h instead of "
                     f"${catalog.EKS_CONTROL_PLANE_USD_PER_HOUR:.2f}/h and ends on {v.end_of_extended}; "
                     f"use {show(DEFAULT_EKS_VERSION)}")
    notes += version_notes(cfg)
    etcd = [cfg.experiment_key(i) for i, e in enumerate(cfg.experiments)
            if e.framework == "pytorch" and e.rdzv_backend.startswith("etcd")]
    if etcd:
        # infra.cluster.manifests.etcd_protection_manifests: what protects the one etcd, and what does not.
        notes.append(f"rdzv_backend of {', '.join(dict.fromkeys(etcd))}: etcd is one pod, kept from drains (a "
                     "PodDisruptionBudget) and from preemption (a priority class above the training pods), but an "
                     "update of the system node group evicts it after EKS's 15 minutes (forced, so the update "
                     "ends) and a lost node loses it: the rendezvous then fails every run on it; for long "
                     'production runs prefer "c10d", whose store lives in the agents')
    return notes


def version_notes(cfg: StackConfig) -> list[str]:
    """What is uncertain about the cluster's Kubernetes version: support dates not yet in EKS's calendar, and a
    Lustre client not known to exist for its AL2023 kernel (core.catalog.aws.LUSTRE_CLIENT_KNOWN_KERNELS)."""
    version = cfg.cluster.kubernetes_version
    v = catalog.EKS_CALENDAR[version]
    notes = []
    if v.approximate:
        notes.append(f"cluster.kubernetes_version={show(version)}: its support dates are approximate (released "
                     f"about {v.released}, the first EKS AMI built for it; standard support to about "
                     f"{v.end_of_standard}): `aws eks describe-cluster-versions` gives the exact ones")
    if cfg.storage.kind != "fsx" or v.al2023_kernel in catalog.LUSTRE_CLIENT_KNOWN_KERNELS:
        return notes
    al2023 = ["system"] + [f"gpu_node_groups[{i}]" for i, g in enumerate(cfg.gpu_node_groups)
                           if g.ami_type.startswith("AL2023")]
    notes.append(f"storage.kind=\"fsx\" on cluster.kubernetes_version={show(version)}: the AL2023 nodes "
                 f"({', '.join(al2023)}) run kernel {v.al2023_kernel}, for which no lustre-client package in the "
                 f"AL2023 repositories could be confirmed (known for kernel "
                 f"{', '.join(catalog.LUSTRE_CLIENT_KNOWN_KERNELS)}); where the install fails, the node never takes "
                 "FSx pods and `eksbench run` stops the experiment within minutes, naming the node "
                 "(LustreClientMissing). GPU groups on BOTTLEROCKET_x86_64_NVIDIA carry the Lustre module in their "
                 "kernel")
    return notes


def scaled_from_zero_notes(cfg: StackConfig) -> list[str]:
    """What an autoscaled group's experiments wait for inside their deadline: the group starts at 0 nodes
    (``infra.cluster.autoscaling``), so each Job's pods first wait for a node to boot and join, for the Lustre
    client's install where FSx is mounted on AL2023, and for the image's pull; ``timeout_minutes`` (the Job's
    activeDeadlineSeconds) counts from the Job's creation, so all of that is inside it."""
    notes = []
    for i, g in enumerate(cfg.gpu_node_groups):
        runs = [(k, e) for k, e in enumerate(cfg.experiments) if g.autoscale and cfg.node_group_for(e).name == g.name]
        if not runs:
            continue
        boot, _ = DURATIONS["aws:eks/nodeGroup:NodeGroup"]
        pulls = sorted({m for _, e in runs if (row := compat.find_image(e.image)) and
                        (m := image_pull_minutes(row.size_mb)) is not None})
        pull = f"the image's pull (about {pulls[-1]:g} min)" if pulls else "the image's pull"
        lustre = (", the Lustre client's install" if cfg.storage.kind == "fsx" and g.ami_type.startswith("AL2023")
                  else "")
        keys = ", ".join(f"{cfg.experiment_key(k)}.timeout_minutes={e.timeout_minutes}" for k, e in runs)
        notes.append(f"gpu_node_groups[{i}].autoscale=true: group {g.name!r} starts at 0 nodes, so a node's boot and "
                     f"join (about {boot:g} min){lustre} and {pull} count against each Job's deadline ({keys}): "
                     f"allow for them; its nodes go after {SCALE_DOWN_IDLE} idle")
    return notes
