"""One EKS managed node group: a GPU group from config, or the small CPU system group.

``gpu_node_group_spec`` and ``system_node_group_spec`` are the pure part (what the group is),
``launch_template_data`` the pure launch template; ``NodeGroup`` registers a launch template, a
placement group where asked, and an ``aws.eks.NodeGroup``. GPU nodes carry the taint
``nvidia.com/gpu=true:NoSchedule`` so only pods that tolerate it (training Jobs, the device
plugin) land on them; etcd and staging Jobs go to the system group.

Why not ``pulumi_eks.ManagedNodeGroup`` (pulumi-eks ``nodejs/eks/nodes/nodegroup.ts``):
- its own launch template sets ``httpPutResponseHopLimit: 2`` whenever ``enableIMDSv2`` is given
  (``createMNGCustomLaunchTemplate``), which lets pods reach the node role's credentials; we want 1;
- it rejects a ``launchTemplate`` together with ``enableEfaSupport`` ("If you provide a custom
  launch template, you cannot provide any of ... enableEfaSupport", ``createManagedNodeGroup``),
  and Capacity Blocks need a launch template of our own (EKS user guide, "Create a managed node
  group with Capacity Blocks for ML": InstanceMarketOptions.MarketType "capacity-block",
  CapacityReservationSpecification.CapacityReservationTarget, InstanceType in the template).
So this component builds what pulumi-eks would (EFA interfaces as its ``getEfaNetworkInterfaces``
in ``nodes/instances.ts``; a ``cluster`` placement group as ``createManagedNodeGroup``) in one
template that also carries IMDSv2 with hop limit 1 and, where asked, a Capacity Block.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pulumi
import pulumi_aws as aws

from core.catalog import aws as catalog
from core.config.model import GpuNodeGroup, SystemNodeGroup
from infra.cluster.autoscaling import autoscaled_labels, node_template_tags
from infra.component_options import child_options
from core.contract.names import AUTOSCALER_DISCOVERY_TAG, LUSTRE_CLIENT_LABEL, LUSTRE_CLIENT_READY
from infra.environment import GPU_NODE_LABEL_KEY, GPU_TAINT, SYSTEM_NODE_LABEL

# Inputs of aws.eks.NodeGroup that force a replacement (pulumi-aws 7 schema / the Terraform
# provider's resource_aws_eks_node_group: ForceNew on ami_type, capacity_type, cluster_name,
# disk_size, instance_types, node_group_name, node_group_name_prefix, node_role_arn,
# remote_access, subnet_ids). Pulumi creates the replacement before deleting the old group, so a
# fixed node_group_name would collide: the group is named by prefix only.
NODE_GROUP_REPLACE_INPUTS = ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes",
                             "nodeGroupName", "nodeGroupNamePrefix", "nodeRoleArn", "remoteAccess", "subnetIds")

TAGGED_AT_LAUNCH = ("instance", "volume", "network-interface")

# How EKS rolls a group whose launch template changes (EKS user guide, "Managed node update behavior"; pulumi-aws 7
# NodeGroupUpdateConfigArgs, ForceUpdateVersion). It drains each node; "If the Pods don't leave the node within 15
# minutes and there's no force flag, the upgrade phase fails" with PodEvictionFailure. etcd's PodDisruptionBudget
# allows no eviction (infra.cluster.manifests.etcd_protection_manifests), so the system group, where etcd runs, is
# forced: its update then waits out the 15 minutes per node and goes on, instead of failing and leaving the group in
# a failed update. By default EKS surges new nodes first (desired and max raised by up to twice the zones' count):
# GPU capacity that is often not there, and a Capacity Block group can only update at desired size 0 ("Capacity
# Blocks for ML"). The MINIMAL strategy, which the guide recommends for accelerated instances, launches no node
# beyond the group's size; with every node allowed to go at once, an update does not hold a half-drained group.
GPU_UPDATE_CONFIG = {"update_strategy": "MINIMAL", "max_unavailable_percentage": 100}


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
    efa_interfaces: int = 0  # one per network card (core.catalog.aws.efa_interfaces), EFA groups only
    placement_group: bool = False
    capacity_reservation_id: str | None = None
    lustre_client: bool = False  # install the Lustre client at boot (AL2023 nodes mounting FSx)
    autoscale: bool = False  # Cluster Autoscaler owns the size (infra/cluster/autoscaling.py)
    template_tags: dict[str, str] = field(default_factory=dict)  # its Auto Scaling group's node-template tags
    force_update_version: bool = False  # evict past PodDisruptionBudgets after EKS's 15 minutes (the system group)
    update_config: dict[str, Any] | None = None  # how EKS rolls a template change (GPU_UPDATE_CONFIG)


def gpu_node_group_spec(group: GpuNodeGroup, *, lustre_client: bool = False) -> NodeGroupSpec:
    # Bottlerocket's kernels carry the Lustre module (bottlerocket-os/bottlerocket#3459, re-added for 6.1;
    # #4676: FSx for Lustre mounts on Bottlerocket EKS nodes), so its nodes get the label at creation.
    bottlerocket_lustre = ({LUSTRE_CLIENT_LABEL: LUSTRE_CLIENT_READY}
                           if lustre_client and group.ami_type.startswith("BOTTLEROCKET") else {})
    return NodeGroupSpec(
        role="gpu", name=group.name, instance_type=group.instance_type, ami_type=group.ami_type,
        # An autoscaled group starts empty: Cluster Autoscaler adds nodes when pods wait (infra/cluster/autoscaling.py).
        desired_size=0 if group.autoscale else group.desired_size, min_size=0 if group.autoscale else group.min_size,
        max_size=group.max_size,
        disk_size_gib=group.disk_size_gib, capacity_type=group.capacity_type,
        labels={**group.labels, **autoscaled_labels(group), GPU_NODE_LABEL_KEY: group.name, **bottlerocket_lustre},
        autoscale=group.autoscale, template_tags=node_template_tags(group, lustre_client=lustre_client),
        taints=[dict(GPU_TAINT)], efa=group.efa, placement_group=group.placement_group,
        efa_interfaces=catalog.efa_interfaces(group.instance_type) if group.efa else 0,
        capacity_reservation_id=group.capacity_reservation_id, update_config=dict(GPU_UPDATE_CONFIG),
        lustre_client=lustre_client and group.ami_type.startswith("AL2023"))


def system_node_group_spec(group: SystemNodeGroup, *, lustre_client: bool = False) -> NodeGroupSpec:
    return NodeGroupSpec(
        role="system", name="system", instance_type=group.instance_type, ami_type=catalog.CPU_AMI_TYPE,
        desired_size=group.desired_size, min_size=group.min_size, max_size=group.max_size,
        disk_size_gib=group.disk_size_gib, capacity_type="ON_DEMAND", labels=dict(SYSTEM_NODE_LABEL),
        lustre_client=lustre_client, force_update_version=True)


# AL2023 EKS AMIs do not ship the Lustre client (aws-fsx-csi-driver issues #437 and #460;
# amazon-eks-ami PR #2696 closed without adding it; its reviewer points to user data running
# `dnf install -y lustre-client`, the package in the AL2023 core repository). The FSx for Lustre user
# guide, "Installing the Lustre client", installs it on Amazon Linux 2023 the same way. Managed node
# groups on AL2023 without an AMI id take MIME multipart user data and merge it with EKS's own
# nodeadm NodeConfig (EKS user guide, "Customize managed nodes with launch templates", Amazon EC2
# user data).
# The script's exit status does not keep the node out: the AMI's nodeadm-run.service (which starts
# the kubelet) is ordered `After=nodeadm-config.service cloud-final.service` and requires only
# nodeadm-config (awslabs/amazon-eks-ami templates/al2023/runtime/rootfs/etc/systemd/system/
# nodeadm-run.service, at 81fec2e), so the node joins whatever the script did. What keeps FSx pods
# off a node without a client is a label only a successful install adds: the script then writes a
# NodeConfig drop-in into /etc/eks/nodeadm.d/, which nodeadm-run reads as its second config source
# (`--config-source file:///etc/eks/nodeadm.d/`; nodeadm/README.md, doc/examples.md "Overriding
# configuration with drop-in files") and, the spec differing from the one cached by nodeadm-config,
# re-runs its config phase with (nodeadm/cmd/nodeadm/init/init.go, needsRecache). Kubelet flags from
# several sources are appended, and several --node-labels flags merge (nodeadm/internal/api/merge.go,
# mergeKubeletFlags), so EKS's own labels stay. The pods that mount FSx select the label
# (infra.environment Environment.claim_node_selector): with no such node they stay Pending, and
# `bench run` names why (bench.cloud.kube).
# dnf at boot can fail for a while: SSM's automatic updates hold the RPM lock or empty dnf's cache
# under cloud-init (amazonlinux/amazon-linux-2023#397: "can't create transaction lock", "[Errno 2] No
# such file or directory: /var/cache/dnf/..."). AWS's own AL2023 user data retries the install
# (aws-samples/aws-batch-with-ffmpeg, quoted in amazonlinux/amazon-linux-2023#723: `while true; do dnf
# install ... lustre-client && break; done`); here the retries are bounded, so a repository without a
# client for the node's kernel fails the script instead of looping. `modprobe lustre` then proves the
# module loads, as the EKS user guide's AL2023 example does ("Optimize Amazon FSx for Lustre
# performance on nodes (non-EFA)": `modprobe lustre`, `check_success ... || exit 1`).
LUSTRE_INSTALL_ATTEMPTS = 10
LUSTRE_RETRY_SECONDS = 15
NODEADM_DROP_IN_DIR = "/etc/eks/nodeadm.d"
LUSTRE_DROP_IN = f"{NODEADM_DROP_IN_DIR}/50-eksbench-lustre-client.yaml"
NO_LABEL = f"this node joins without the {LUSTRE_CLIENT_LABEL} label, so no FSx pod lands on it"
LUSTRE_CLIENT_SCRIPT = f"""#!/bin/bash
set -uo pipefail
for attempt in $(seq 1 {LUSTRE_INSTALL_ATTEMPTS}); do
  if dnf install -y lustre-client; then
    break
  fi
  if [ "$attempt" -eq {LUSTRE_INSTALL_ATTEMPTS} ]; then
    echo "eksbench: dnf install lustre-client failed {LUSTRE_INSTALL_ATTEMPTS} times (kernel $(uname -r)); {NO_LABEL}" >&2
    exit 1
  fi
  echo "eksbench: dnf install lustre-client failed (attempt $attempt), retrying in {LUSTRE_RETRY_SECONDS} s" >&2
  sleep {LUSTRE_RETRY_SECONDS}
done
if ! modprobe lustre; then
  echo "eksbench: lustre-client installed but the lustre module does not load on kernel $(uname -r); {NO_LABEL}" >&2
  exit 1
fi
mkdir -p {NODEADM_DROP_IN_DIR}
cat > {LUSTRE_DROP_IN} <<'EOF'
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags:
      - --node-labels={LUSTRE_CLIENT_LABEL}={LUSTRE_CLIENT_READY}
EOF
"""


def mime_user_data(script: str) -> str:
    """``script`` as the one part of a MIME multipart document, base64-encoded as launch templates take it."""
    doc = ('MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n'
           '--//\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
           f"{script}\n--//--\n")
    return base64.b64encode(doc.encode()).decode()


# IMDSv2 only, one hop: a pod (one hop further, behind the node's network namespace) cannot reach
# the instance metadata service, so it cannot take the node role's credentials (EKS Best Practices,
# Security: "Restrict access to the instance profile assigned to the worker node").
METADATA_OPTIONS = {"http_endpoint": "enabled", "http_tokens": "required", "http_put_response_hop_limit": 1}


def launch_template_data(spec: NodeGroupSpec, *, security_group_id: Any = None,
                         placement_group_name: Any = None) -> dict[str, Any]:
    """The launch template's arguments (pulumi-aws ``aws.ec2.LaunchTemplate`` names), pure.

    EFA groups get ``spec.efa_interfaces`` interfaces, the count the pods request too (one source:
    core.catalog.aws.efa_interfaces); ``security_group_id``: the group EFA interfaces carry, the
    EKS-created cluster security group (as pulumi-eks passes
    ``core.cluster.vpcConfig.clusterSecurityGroupId``); ``placement_group_name``: the placement group."""
    # Root volume: /dev/xvda on AL2023, the data volume /dev/xvdb on Bottlerocket (pulumi-eks
    # nodegroup.ts, createMNGCustomLaunchTemplate). With a launch template, disk size goes here and
    # not on the node group (EKS rejects diskSize with a launch template).
    device = "/dev/xvdb" if spec.ami_type.startswith("BOTTLEROCKET") else "/dev/xvda"
    data: dict[str, Any] = {
        "metadata_options": dict(METADATA_OPTIONS),
        "block_device_mappings": [{"device_name": device, "ebs": {
            "volume_size": spec.disk_size_gib, "volume_type": "gp3", "encrypted": "true",
            "delete_on_termination": "true"}}],
    }
    if spec.lustre_client:
        data["user_data"] = mime_user_data(LUSTRE_CLIENT_SCRIPT)
    if spec.efa:
        data["network_interfaces"] = efa_network_interfaces(spec.efa_interfaces, security_group_id)
    if placement_group_name is not None:
        data["placement"] = {"group_name": placement_group_name}
    if spec.capacity_type == "CAPACITY_BLOCK":
        data["instance_type"] = spec.instance_type
        data["instance_market_options"] = {"market_type": "capacity-block"}
        data["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": spec.capacity_reservation_id}}
    return data


def efa_network_interfaces(cards: int, security_group_id: Any) -> list[dict[str, Any]]:
    """One EFA interface per network card, as pulumi-eks ``getEfaNetworkInterfaces`` builds them: the
    primary "efa" at device index 0, the others "efa-only" at device index 1."""
    return [{"network_card_index": i, "device_index": 0 if i == 0 else 1,
             "interface_type": "efa" if i == 0 else "efa-only", "delete_on_termination": "true",
             "security_groups": [security_group_id]} for i in range(max(int(cards), 1))]


@dataclass(frozen=True)
class NodeGroupArgs:
    """spec: what the group is (gpu_node_group_spec / system_node_group_spec). cluster_name: the EKS
    cluster's name as an Output that resolves once the cluster exists. node_role: from EksCluster
    (EKS creates the role's EC2_LINUX access entry when the group is created). subnet_ids: private
    subnets only. cluster_security_group_id: the EKS-created cluster security group, which EFA
    interfaces must carry. node_role_policies: the node role's policy attachments, which the group
    waits for. tags: on the group, its template and its nodes."""
    spec: NodeGroupSpec
    cluster_name: pulumi.Input[str]
    node_role: Any  # aws.iam.Role
    subnet_ids: Sequence[pulumi.Input[str]]
    cluster_security_group_id: pulumi.Input[str] | None = None
    node_role_policies: Sequence[Any] = ()  # aws.iam.RolePolicyAttachment
    tags: Mapping[str, str] = field(default_factory=dict)


class NodeGroup(pulumi.ComponentResource):
    node_group_name: pulumi.Output[str]

    def __init__(self, name: str, args: NodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:NodeGroup", name, None, opts)
        spec = args.spec
        tags = {**args.tags, "eksbench:node-group": spec.name}
        child = child_options(self, opts)
        taint_effect = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
        placement = None
        if spec.placement_group:
            placement = aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster", tags=tags, opts=child)
        # As pulumi-eks does, one EFA per network card; the count is the catalog's (core.catalog.aws), the
        # same the pods request, so a node never has interfaces its pods cannot ask for.
        data = launch_template_data(spec, security_group_id=args.cluster_security_group_id,
                                    placement_group_name=placement.name if placement else None)
        template = aws.ec2.LaunchTemplate(
            f"{name}-lt", description=f"eksbench node group {spec.name}: IMDSv2 hop limit 1", update_default_version=True,
            # What EC2 creates from the template carries the stack's tags, so `bench audit` finds a leftover:
            # "instance | volume | network-interface | spot-instances-request" can be tagged at launch (EC2 API
            # reference, LaunchTemplateTagSpecificationRequest); EKS forbids none of them in a node group's
            # template (EKS API reference, LaunchTemplateSpecification). ENIs the VPC CNI attaches later
            # are its own (tagged cluster.k8s.amazonaws.com/name): the audit looks for those by VPC.
            tag_specifications=[{"resource_type": kind, "tags": tags} for kind in TAGGED_AT_LAUNCH],
            tags=tags, opts=child, **data)
        block = spec.capacity_type == "CAPACITY_BLOCK"
        ng = aws.eks.NodeGroup(
            f"{name}-ng", cluster_name=args.cluster_name,
            # A prefix, never a fixed name: see NODE_GROUP_REPLACE_INPUTS.
            node_group_name_prefix=f"{spec.name}-",
            node_role_arn=args.node_role.arn, subnet_ids=list(args.subnet_ids),
            # With a Capacity Block the instance type lives in the launch template (EKS user guide,
            # "Create a managed node group with Capacity Blocks for ML").
            instance_types=None if block else [spec.instance_type], ami_type=spec.ami_type,
            capacity_type=spec.capacity_type,
            scaling_config={"desired_size": spec.desired_size, "min_size": spec.min_size, "max_size": spec.max_size},
            labels=spec.labels,
            taints=[{"key": t["key"], "value": t["value"], "effect": taint_effect[t["effect"]]} for t in spec.taints],
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            force_update_version=spec.force_update_version or None, update_config=spec.update_config,
            tags=tags,
            # The role's permissions exist before the group and outlive it: at destroy EKS still needs
            # them to drain the nodes and delete their instances and network interfaces. The pulumi-aws
            # NodeGroup example (pulumi_aws/eks/node_group.py) depends on the role's policy attachments;
            # the same example in terraform-provider-aws (website/docs/r/eks_node_group.html.markdown)
            # says why: "Ensure that IAM Role permissions are created before and deleted after EKS Node
            # Group handling. Otherwise, EKS will not be able to properly delete EC2 Instances and
            # Elastic Network Interfaces."
            opts=child_options(self, opts, depends_on=list(args.node_role_policies),
                               # Cluster Autoscaler sets the desired size; the EKS API says not to set it by hand
                               # then (NodegroupScalingConfig.desiredSize), so Pulumi leaves it as it finds it.
                               ignore_changes=["scalingConfig.desiredSize"] if spec.autoscale else None))
        self._template_tags(name, ng, spec, child, cluster_name=args.cluster_name)
        self.node_group_name = ng.node_group_name
        self.node_group = ng
        self.launch_template = template
        self.register_outputs({"node_group_name": self.node_group_name})

    @staticmethod
    def _template_tags(name: str, ng: Any, spec: NodeGroupSpec, opts: pulumi.ResourceOptions, *,
                       cluster_name: Any) -> None:
        """The node-template tags on the group's Auto Scaling group: EKS does not copy a managed node group's tags
        to it (aws/containers-roadmap#608), and Cluster Autoscaler reads them there; and on an opted-in group, the
        tag the autoscaler discovers it by (``AUTOSCALER_DISCOVERY_TAG``). Not propagated at launch."""
        asg = ng.resources.apply(lambda r: r[0].autoscaling_groups[0].name)
        for i, (key, value) in enumerate(sorted(spec.template_tags.items())):
            aws.autoscaling.Tag(f"{name}-template-{i}", autoscaling_group_name=asg,
                                tag={"key": key, "value": value, "propagate_at_launch": False}, opts=opts)
        if spec.autoscale:
            key = pulumi.Output.from_input(cluster_name).apply(lambda c: f"{AUTOSCALER_DISCOVERY_TAG}/{c}")
            aws.autoscaling.Tag(f"{name}-discovery", autoscaling_group_name=asg,
                                tag={"key": key, "value": "owned", "propagate_at_launch": False}, opts=opts)
