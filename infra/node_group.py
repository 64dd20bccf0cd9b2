"""One EKS managed node group: a GPU group from config, or the small CPU system group.

``gpu_node_group_spec`` and ``system_node_group_spec`` are the pure part (what the group
is); ``NodeGroup`` registers it with pulumi-eks. GPU nodes carry the taint
``nvidia.com/gpu=true:NoSchedule`` so only pods that tolerate it (training Jobs, the
device plugin) land on them; etcd and staging Jobs go to the system group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pulumi
import pulumi_eks as eks

from infra.component_options import child_options
from infra.environment import GPU_NODE_LABEL_KEY, GPU_TAINT, SYSTEM_NODE_LABEL
from spec import aws_catalog as catalog
from spec.config import GpuNodeGroup, SystemNodeGroup


@dataclass(frozen=True)
class NodeGroupSpec:
    role: str  # gpu | system
    name: str
    instance_type: str
    ami_type: str
    desired_size: int
    min_size: int
    max_size: int
    disk_size_gib: int
    capacity_type: str
    labels: dict[str, str]
    taints: list[dict[str, str]] = field(default_factory=list)
    efa: bool = False
    placement_group_az: str | None = None


def gpu_node_group_spec(group: GpuNodeGroup, *, placement_az: str | None) -> NodeGroupSpec:
    return NodeGroupSpec(
        role="gpu", name=group.name, instance_type=group.instance_type, ami_type=group.ami_type,
        desired_size=group.desired_size, min_size=group.min_size, max_size=group.max_size,
        disk_size_gib=group.disk_size_gib, capacity_type=group.capacity_type,
        labels={**group.labels, GPU_NODE_LABEL_KEY: group.name},
        taints=[dict(GPU_TAINT)], efa=group.efa,
        placement_group_az=placement_az if group.placement_group else None)


def system_node_group_spec(group: SystemNodeGroup) -> NodeGroupSpec:
    return NodeGroupSpec(
        role="system", name="system", instance_type=group.instance_type, ami_type=catalog.CPU_AMI_TYPE,
        desired_size=group.desired_size, min_size=group.min_size, max_size=group.max_size,
        disk_size_gib=group.disk_size_gib, capacity_type="ON_DEMAND", labels=dict(SYSTEM_NODE_LABEL))


@dataclass(frozen=True)
class NodeGroupArgs:
    """spec: what the group is (gpu_node_group_spec / system_node_group_spec). cluster, cluster_name,
    node_role: from EksCluster. subnet_ids: private subnets only. tags: on the group and its nodes."""
    spec: NodeGroupSpec
    cluster: Any  # pulumi_eks.Cluster
    cluster_name: str
    node_role: Any  # aws.iam.Role
    subnet_ids: Sequence[pulumi.Input[str]]
    tags: Mapping[str, str] = field(default_factory=dict)


class NodeGroup(pulumi.ComponentResource):
    node_group_name: pulumi.Output[str]

    def __init__(self, name: str, args: NodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:NodeGroup", name, None, opts)
        spec, cluster_name = args.spec, args.cluster_name
        taint_effect = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
        group_name = f"{cluster_name}-{spec.name}"[:63]
        ng = eks.ManagedNodeGroup(
            f"{name}-mng", cluster=args.cluster, node_group_name=group_name, node_role=args.node_role,
            subnet_ids=list(args.subnet_ids), instance_types=[spec.instance_type], ami_type=spec.ami_type,
            capacity_type=spec.capacity_type, disk_size=spec.disk_size_gib,
            scaling_config={"desired_size": spec.desired_size, "min_size": spec.min_size, "max_size": spec.max_size},
            labels=spec.labels,
            taints=[{"key": t["key"], "value": t["value"], "effect": taint_effect[t["effect"]]} for t in spec.taints],
            enable_efa_support=spec.efa or None,
            placement_group_availability_zone=spec.placement_group_az,
            tags={**args.tags, "eksbench:node-group": spec.name},
            opts=child_options(self, opts))
        self.node_group_name = pulumi.Output.from_input(group_name)
        self.managed_node_group = ng
        self.register_outputs({"node_group_name": self.node_group_name})
