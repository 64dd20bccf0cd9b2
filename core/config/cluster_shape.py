"""The shape of a stack's cluster sections: ``network``, ``cluster`` (the control plane), ``gpu_node_groups`` and
``system_nodes``.

Part of the first validation stage (``core.config.shape``): keys, types, single values, and instance types and
Kubernetes versions the catalog knows (``core.catalog.aws``). How the sections fit each other and the region is
the second stage, ``program.validation``.
"""

from __future__ import annotations

import re
from typing import Any

from core.catalog import aws as catalog
from core.config.fields import Reader, cidr_rule, read_items
from core.config.model import NAME, Cluster, GpuNodeGroup, Network, SystemNodeGroup, default_of

# Capacity types of an EKS managed node group (EKS API CreateNodegroup capacityType; CAPACITY_BLOCK
# with a launch template that targets the block: EKS user guide, "Capacity Blocks for ML").
CAPACITY_TYPES = ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")


def parse_network(r: Reader) -> Network:
    """``network``: the VPC's address block and zones, or the ids of an existing VPC and its subnets."""
    d = Network()
    cidr = r.string("vpc_cidr", d.vpc_cidr, example='"10.0.0.0/16"')
    if isinstance(cidr, str) and cidr_rule(cidr):
        r.fail(r.key("vpc_cidr"), cidr, cidr_rule(cidr), '"10.0.0.0/16"')
    existing = Reader(r.mapping("existing"), r.key("existing"), r.problems)
    vpc_id = existing.string("vpc_id", None, pattern=r"vpc-[0-9a-f]{8,17}", example='"vpc-0123456789abcdef0"')
    subnet = lambda s: "" if re.fullmatch(r"subnet-[0-9a-f]{8,17}", s) else "must be a subnet id"  # noqa: E731
    public = existing.strings("public_subnet_ids", (), check=subnet, example='["subnet-0123456789abcdef0"]')
    private = existing.strings("private_subnet_ids", (), check=subnet, example='["subnet-0123456789abcdef0"]')
    existing.finish()
    azs = r.strings("azs", (), example='["us-west-2a", "us-west-2b", "us-west-2c"]',
                    check=lambda z: "" if re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d[a-z]", z) else "must be a zone name")
    net = Network(
        vpc_cidr=cidr,
        az_count=r.integer("az_count", d.az_count, minimum=2, maximum=6, example="3"),
        nat=r.string("nat", d.nat, choices=("single", "per_az")),
        existing_vpc_id=vpc_id, existing_public_subnet_ids=public, existing_private_subnet_ids=private, azs=azs)
    r.finish()
    return net


def parse_cluster(r: Reader) -> Cluster:
    """``cluster``: the control plane's Kubernetes version, who reaches its endpoint, its admins and logs."""
    d = Cluster()
    default = f'"{d.kubernetes_version}"'
    version = r.string("kubernetes_version", d.kubernetes_version, example=default)
    if isinstance(version, str) and version not in catalog.EKS_VERSIONS:
        r.fail(r.key("kubernetes_version"), version,
               f"EKS offers {', '.join(catalog.EKS_VERSIONS)} (as of {catalog.EKS_CALENDAR_CHECKED})", default)
    c = Cluster(
        kubernetes_version=version,
        # None when absent: program.validation asks for an explicit choice.
        public_access_cidrs=r.strings("public_access_cidrs", None, check=cidr_rule,
                                      example='["<your address>/32"] or [] (private endpoint only)'),
        admin_role_arns=r.strings("admin_role_arns", (), example='["arn:aws:iam::123456789012:role/Admin"]',
                                  check=lambda s: "" if re.fullmatch(r"arn:aws[\w-]*:iam::\d{12}:role/.+", s)
                                  else "must be an IAM role ARN"),
        log_types=r.strings("log_types", d.log_types, example='["api", "audit"]',
                            check=lambda s: "" if s in ("api", "audit", "authenticator", "controllerManager",
                                                        "scheduler") else
                            "must be one of api, audit, authenticator, controllerManager, scheduler"))
    r.finish()
    return c


def parse_gpu_groups(raw: Any, problems: list[str]) -> tuple[GpuNodeGroup, ...]:
    """``gpu_node_groups``: a non-empty list of GPU node groups, the ones whose shape is clean."""
    if raw is None:
        problems.append('gpu_node_groups: is required, e.g. [{"name": "gpu", "instance_type": "p3.16xlarge"}]')
        return ()
    return read_items(raw, "gpu_node_groups", _gpu_group, problems, non_empty=True, what="node groups",
                      example='[{"name": "gpu", "instance_type": "p3.16xlarge"}]')


def _gpu_instance_type(r: Reader) -> tuple[Any, catalog.InstanceType | None]:
    """A group's ``instance_type`` and its catalog entry: a GPU type the catalog knows."""
    itype = r.string("instance_type", example='"p3.16xlarge"')
    spec = catalog.INSTANCE_TYPES.get(itype) if isinstance(itype, str) else None
    if isinstance(itype, str):
        if spec is None:
            gpu_types = ", ".join(n for n, t in catalog.INSTANCE_TYPES.items() if t.gpus)
            r.fail(r.key("instance_type"), itype, f"not in the instance catalog; GPU types: {gpu_types}",
                   '"g6e.48xlarge"')
        elif not spec.gpus:
            r.fail(r.key("instance_type"), itype, f"is not a GPU instance type; choose one of "
                   f"{', '.join(catalog.GPU_ALTERNATIVES)}", '"p4d.24xlarge"')
    return itype, spec


def _auto_or_flag(r: Reader, name: str, auto: bool) -> bool:
    """A key that is "auto" (absent too: then ``auto``), true or false."""
    value = r.raw(name, "auto")
    if value == "auto":
        return auto
    if isinstance(value, bool):
        return value
    r.fail(r.key(name), value, 'must be "auto", true or false', '"auto"')
    return False


def _gpu_group(r: Reader) -> GpuNodeGroup | None:
    """One GPU node group; None when its shape has a problem."""
    n0 = len(r.problems)
    name = r.string("name", pattern=NAME, example='"gpu"')
    itype, spec = _gpu_instance_type(r)
    g = lambda name: default_of(GpuNodeGroup, name)  # noqa: E731 - the dataclass holds the defaults
    ami = r.string("ami_type", g("ami_type"), choices=catalog.GPU_AMI_TYPES)
    min_size = r.integer("min_size", g("min_size"), minimum=0, example="0")
    max_size = r.integer("max_size", g("max_size"), minimum=1, example="2")
    desired = r.integer("desired_size", max_size if isinstance(max_size, int) else g("desired_size"), minimum=0,
                        example="2")
    efa = _auto_or_flag(r, "efa", bool(spec and spec.efa))
    capacity = r.string("capacity_type", g("capacity_type"), choices=CAPACITY_TYPES)
    # A Capacity Block is already placed by AWS (EC2 UltraClusters); a placement group of our own
    # would not match the reservation.
    placement = _auto_or_flag(r, "placement_group", efa and capacity != "CAPACITY_BLOCK")
    group = dict(
        name=name, instance_type=itype, ami_type=ami, desired_size=desired, min_size=min_size, max_size=max_size,
        disk_size_gib=r.integer("disk_size_gib", g("disk_size_gib"), minimum=100, maximum=16384, example="200"),
        capacity_type=capacity,
        capacity_reservation_id=r.string("capacity_reservation_id", None, pattern=r"cr-[0-9a-f]{8,17}",
                                         example='"cr-0123456789abcdef0"'),
        availability_zone=r.string("availability_zone", None, pattern=r"[a-z]{2}(-[a-z]+)+-\d[a-z]",
                                   example='"us-east-1a"'),
        subnet_id=r.string("subnet_id", None, pattern=r"subnet-[0-9a-f]{8,17}", example='"subnet-0123456789abcdef0"'),
        multi_zone_reason=r.string("multi_zone_reason", None,
                                   example='"p5 capacity is short in any one zone"'),
        efa=efa, placement_group=placement, labels=r.string_map("labels"),
        autoscale=r.boolean("autoscale", g("autoscale")))
    return None if len(r.problems) > n0 else GpuNodeGroup(**group)


def parse_system_nodes(r: Reader) -> SystemNodeGroup:
    """``system_nodes``: the CPU node group (the add-ons, dataset staging, the autostop controller)."""
    d = SystemNodeGroup()
    itype = r.string("instance_type", d.instance_type, example='"m6i.large"')
    if isinstance(itype, str) and itype not in catalog.INSTANCE_TYPES:
        cpu = ", ".join(n for n, t in catalog.INSTANCE_TYPES.items() if not t.gpus)
        r.fail(r.key("instance_type"), itype, f"not in the instance catalog; CPU types: {cpu}", '"m6i.large"')
    s = SystemNodeGroup(
        instance_type=itype,
        min_size=r.integer("min_size", d.min_size, minimum=1, example="1"),
        max_size=r.integer("max_size", d.max_size, minimum=1, example="3"),
        desired_size=r.integer("desired_size", d.desired_size, minimum=1, example="2"),
        disk_size_gib=r.integer("disk_size_gib", d.disk_size_gib, minimum=20, example="50"))
    r.finish()
    return s
