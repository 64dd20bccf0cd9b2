"""Meaning rules of the node groups: sizes (min <= desired <= max), EFA on a type that has it, Capacity
Blocks, a group that must sit in one zone placed in one, unique names, and Cluster Autoscaler's opt-in.
``program.validation.meaning_problems`` runs them with the others."""

from __future__ import annotations

from core.catalog import aws as catalog
from core.catalog.pins import CLUSTER_AUTOSCALER_CHARTS
from core.config.fields import problem, show
from core.config.model import GpuNodeGroup, StackConfig
from infra.cluster.autoscaling import missing_efa_tags, node_template_tags


def node_group_problems(cfg: StackConfig) -> list[str]:
    """Each GPU group: a unique name, sizes in order, its placement; the autoscaler's opt-in; the system nodes' sizes."""
    out, seen = [], set()
    for i, g in enumerate(cfg.gpu_node_groups):
        key = f"gpu_node_groups[{i}]"
        if g.name in seen:
            out.append(problem(f"{key}.name", g.name, "must be unique among gpu_node_groups", '"gpu-b"'))
        seen.add(g.name)
        out += _sizes(key, g.min_size, g.max_size, g.desired_size, desired_example=g.max_size)
        out += _node_group_placement(cfg, i, g)
    out += autoscaler_problems(cfg)
    s = cfg.system_nodes
    return out + _sizes("system_nodes", s.min_size, s.max_size, s.desired_size, desired_example=s.min_size)


def _sizes(key: str, min_size: int, max_size: int, desired: int, *, desired_example: int) -> list[str]:
    """min_size <= desired_size <= max_size, the first broken one named."""
    if max_size < min_size:
        return [problem(f"{key}.max_size", max_size, f"must be >= min_size ({min_size})", str(max(min_size, 1)))]
    if not min_size <= desired <= max_size:
        return [problem(f"{key}.desired_size", desired,
                        f"must be between min_size ({min_size}) and max_size ({max_size})", str(desired_example))]
    return []


def _node_group_placement(cfg: StackConfig, i: int, g: GpuNodeGroup) -> list[str]:
    """Where ``gpu_node_groups[i]`` may go: EFA on a type with it, a Capacity Block's reservation and zone, one zone
    where it needs one, a subnet or zone among the network's."""
    key, out, n = f"gpu_node_groups[{i}]", [], cfg.network
    if g.efa and not catalog.INSTANCE_TYPES[g.instance_type].efa:
        out.append(problem(f"{key}.efa", True, f'{g.instance_type} does not support EFA; use "auto" or false',
                           '"auto"'))
    if g.capacity_type == "CAPACITY_BLOCK":
        if not g.capacity_reservation_id:
            out.append(f'{key}.capacity_reservation_id: is required with capacity_type "CAPACITY_BLOCK": the '
                       'Capacity Block\'s reservation id, e.g. "cr-0123456789abcdef0" (EC2 console, Capacity '
                       'Reservations)')
        if not g.availability_zone and not g.subnet_id:
            out.append(f'{key}.availability_zone: is required with capacity_type "CAPACITY_BLOCK": the zone the '
                       'block was bought in, e.g. "us-east-1a" (a block serves one zone)')
        if g.placement_group:
            out.append(problem(f"{key}.placement_group", True,
                               "a Capacity Block is already placed by AWS; a placement group of our own does not "
                               "match the reservation and the launch fails; set it to false or \"auto\"", "false"))
    elif g.capacity_reservation_id:
        out.append(problem(f"{key}.capacity_reservation_id", g.capacity_reservation_id,
                           f'applies to capacity_type "CAPACITY_BLOCK" only (here {g.capacity_type})',
                           'capacity_type: "CAPACITY_BLOCK"'))
    if g.autoscale and g.capacity_type == "CAPACITY_BLOCK":
        out.append(problem(f"{key}.autoscale", True, f"node group {g.name!r} is a Capacity Block, which bills the whole "
                           "block whatever runs: scaling it down saves nothing; set it to false", "false"))
    if g.efa or g.placement_group or g.capacity_type == "CAPACITY_BLOCK":
        why = "efa" if g.efa else "placement_group" if g.placement_group else "a Capacity Block"
        out += _single_zone(cfg, key, g, why)
    if g.subnet_id and not n.existing_vpc_id:
        out.append(problem(f"{key}.subnet_id", g.subnet_id, "applies to an existing VPC (network.existing) only; "
                           "with a created VPC set availability_zone instead", '"us-east-1a"'))
    elif g.subnet_id and g.subnet_id not in n.existing_private_subnet_ids:
        out.append(problem(f"{key}.subnet_id", g.subnet_id, "must be one of network.existing.private_subnet_ids",
                           show(n.existing_private_subnet_ids[0] if n.existing_private_subnet_ids else "subnet-...")))
    if g.availability_zone and n.azs and g.availability_zone not in n.azs:
        out.append(problem(f"{key}.availability_zone", g.availability_zone,
                           f"must be one of network.azs ({', '.join(n.azs)})", show(n.azs[0])))
    return out


def _single_zone(cfg: StackConfig, key: str, g: GpuNodeGroup, why: str) -> list[str]:
    """A group that must sit in one zone has one: chosen from the network, or named for an existing VPC."""
    n = cfg.network
    if n.existing_vpc_id and not g.subnet_id:
        return [f"{key}.subnet_id: is required with {why} in an existing VPC: the one private subnet (one zone) "
                f"the nodes go in, one of {', '.join(n.existing_private_subnet_ids)}"]
    return []


def autoscaler_problems(cfg: StackConfig) -> list[str]:
    """Groups that opt in to Cluster Autoscaler: a chart pinned for the cluster's minor (core/catalog/pins.py),
    and on EFA groups the node-template tags for both EFA resources (infra/cluster/autoscaling.py says why)."""
    opted = [(i, g) for i, g in enumerate(cfg.gpu_node_groups) if g.autoscale]
    out = []
    minor = ".".join(cfg.cluster.kubernetes_version.split(".")[:2])
    if opted and minor not in CLUSTER_AUTOSCALER_CHARTS:
        out.append(problem("cluster.kubernetes_version", cfg.cluster.kubernetes_version,
                           f"has no Cluster Autoscaler chart pinned, which gpu_node_groups[{opted[0][0]}].autoscale "
                           f"needs (its minor must match the cluster's); pinned: {', '.join(CLUSTER_AUTOSCALER_CHARTS)}",
                           show(list(CLUSTER_AUTOSCALER_CHARTS)[-1])))
    for i, g in opted:
        missing = missing_efa_tags(g, node_template_tags(g))
        if missing:
            out.append(problem(f"gpu_node_groups[{i}].autoscale", True, f"EFA group {g.name!r} lacks the node-template "
                               f"tags for {', '.join(missing)}: scaled from 0, no EFA pod would fit it", "false"))
    return out
