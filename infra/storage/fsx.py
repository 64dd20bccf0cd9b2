"""Shared storage on FSx for Lustre, linked to S3 by data repository associations.

``/datasets`` imports the datasets prefix automatically (lazy load on first read);
``/results`` exports new and changed files (never deletions) to the stack's results prefix, so
results outlive the file system: data not exported is lost when the file system is deleted
(AWS FSx for Lustre docs, "Exporting files using data repository associations").

One writer per key: the in-container launcher owns ``<project>/<stack>/<run-id>/<experiment>/``
(it uploads there on EFS and FSx alike); the export owns ``<project>/<stack>/fsx-export/``, a
crash-safe copy of the shared volume's ``/results`` that survives a pod killed before its upload.
Checkpoints rewritten every few steps export as new object versions; the results bucket expires
noncurrent versions (infra.storage.results_bucket).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pulumi
import pulumi_aws as aws

from core.config.model import Fsx
from infra.cluster.manifests import persistent_volume_manifest
from infra.component_options import child_options
from infra.environment import Environment
from infra.storage.shared_volume import register_shared_volume

# Lustre: TCP 988 and 1018-1023 between clients and file servers, in both directions (LNet lets
# servers open connections to clients too), and among the servers (AWS FSx for Lustre docs, "File
# system access control with Amazon VPC": inbound and outbound rules on the file system's group and
# on the clients' group).
LUSTRE_PORTS = ((988, 988), (1018, 1023))
# Results: export what is written or rewritten; never propagate deletions (a cleaned scratch
# directory must not delete results in S3). Imports keep all three so the dataset view follows S3.
EXPORT_EVENTS = ["NEW", "CHANGED"]
FSX_EXPORT_PREFIX = "fsx-export/"
IMPORT_EVENTS = ["NEW", "CHANGED", "DELETED"]


def lustre_rules(sg: aws.ec2.SecurityGroup, node_security_group_id, name: str,
                 opts, tags: Mapping[str, str] | None = None) -> tuple[list, list]:
    """Lustre between the nodes and the file system (both ways) and among the file servers, as rules of
    their own: ``(server_rules, node_rules)``.

    ``server_rules`` (the file system's group admitting itself) are what FSx checks when it creates
    the file system: the file system waits for them (see ``FsxStorage``). ``node_rules`` reference the
    nodes' group, which exists only with the cluster (~12 min): separate rule resources (not inline
    ingress) let the file system, which takes ~10 min, start without waiting for it. The rules on the
    nodes' group (the EKS-created cluster group) open only the Lustre ports, and only to the file
    system's group.
    """
    server_rules, node_rules = [], []
    for lo, hi in LUSTRE_PORTS:
        common = dict(ip_protocol="tcp", from_port=lo, to_port=hi, tags=dict(tags or {}), opts=opts)
        server_rules += [
            aws.vpc.SecurityGroupIngressRule(f"{name}-self-{lo}", security_group_id=sg.id,
                                             referenced_security_group_id=sg.id,
                                             description="Lustre between the file system's servers", **common),
            aws.vpc.SecurityGroupEgressRule(f"{name}-self-egress-{lo}", security_group_id=sg.id,
                                            referenced_security_group_id=sg.id,
                                            description="Lustre between the file system's servers", **common),
        ]
        node_rules += [
            aws.vpc.SecurityGroupIngressRule(f"{name}-nodes-{lo}", security_group_id=sg.id,
                                             referenced_security_group_id=node_security_group_id,
                                             description="Lustre from the cluster's nodes", **common),
            aws.vpc.SecurityGroupEgressRule(f"{name}-to-nodes-{lo}", security_group_id=sg.id,
                                            referenced_security_group_id=node_security_group_id,
                                            description="Lustre to the cluster's nodes", **common),
            aws.vpc.SecurityGroupIngressRule(f"{name}-node-in-{lo}", security_group_id=node_security_group_id,
                                             referenced_security_group_id=sg.id,
                                             description="Lustre from the FSx file servers to the nodes", **common),
        ]
    return server_rules, node_rules


def cross_zone_notes(groups: list[tuple[int, str, list[str]]], system_zones: list[str]) -> list[str]:
    """Who reads the file system from another zone than its own: it lives in one subnet, the first GPU group's
    first (``program.stack.build_storage``). ``groups``: (index, name, zones) of each GPU group, in order;
    ``system_zones``: the system nodes' (they mount it too). Data crossing zones is billed by the GB each way and
    goes slower than within one; a group pinned to the file system's zone does not."""
    if not groups or not groups[0][2]:
        return []
    home = groups[0][2][0]
    notes = [f"gpu_node_groups[{i}] ({name}): its nodes in {', '.join(z for z in zones if z != home)} read FSx for "
             f"Lustre in {home} across zones (billed per GB each way, and slower); set its availability_zone to "
             f"{home} to keep its reads in one zone" for i, name, zones in groups if any(z != home for z in zones)]
    if any(z != home for z in system_zones):
        notes.append(f"system nodes: spread over {', '.join(system_zones)}, so those outside {home} read FSx for "
                     "Lustre (the datasets' staging Job runs there) across zones")
    return notes


@dataclass(frozen=True)
class FsxStorageArgs:
    """config: deployment type, capacity, throughput. env: the claim and namespace the volume is for.
    cluster_name: the EKS cluster the CSI add-on goes to. vpc_id, subnet_id: where the file system lives.
    node_security_group_id: the security group the nodes carry; only it may reach Lustre.
    datasets_uri: the S3 prefix imported at /datasets. results_uri: the S3 prefix /results exports to.
    volume_depends_on: what the CSI add-on and the Kubernetes volume objects wait for (the nodes the
    controller runs on, the namespace); the file system itself starts at once. tags: on every AWS resource.
    The Kubernetes provider comes through ``opts``."""
    config: Fsx
    env: Environment
    cluster_name: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    node_security_group_id: pulumi.Input[str]
    datasets_uri: pulumi.Input[str]
    results_uri: pulumi.Input[str]
    volume_depends_on: Sequence[Any] = ()
    tags: Mapping[str, str] = field(default_factory=dict)


class FsxStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    claim: pulumi.CustomResource

    def __init__(self, name: str, args: FsxStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:FsxStorage", name, None, opts)
        config, tags = args.config, dict(args.tags)
        child = child_options(self, opts)
        sg = aws.ec2.SecurityGroup(f"{name}-sg", vpc_id=args.vpc_id, description="Lustre from EKS nodes to FSx",
                                   tags=tags, opts=child)
        server_rules, node_rules = lustre_rules(sg, args.node_security_group_id, f"{name}-sg", child, tags)
        persistent = config.deployment_type.startswith("PERSISTENT")
        # Encrypted at rest always (AWS-managed key); 2.15 supports data repository associations.
        # FSx checks at creation that its security group lets the servers reach each other on the Lustre
        # ports and fails with InvalidNetworkSettings ("... do not permit Lustre LNET network traffic on
        # port 988") if the rules are not there yet: the file system waits for them, not only for the group
        # (the same race and fix: aws/aws-parallelcluster#6181, PR #6342 "adding dependsOn to ensure Lustre
        # file system is created after security group rules").
        fs = aws.fsx.LustreFileSystem(
            # pulumi-aws 7 takes the one subnet a Lustre file system lives in as a string.
            f"{name}-fs", storage_capacity=config.storage_capacity_gib, deployment_type=config.deployment_type,
            per_unit_storage_throughput=config.per_unit_storage_throughput if persistent else None,
            subnet_ids=args.subnet_id, security_group_ids=[sg.id], file_system_type_version="2.15",
            data_compression_type="LZ4", tags={**tags, "Name": f"{name}-fs"},
            opts=child_options(self, opts, depends_on=server_rules,
                               custom_timeouts=pulumi.CustomTimeouts(create="40m")))
        datasets = aws.fsx.DataRepositoryAssociation(
            f"{name}-datasets", file_system_id=fs.id, file_system_path="/datasets",
            data_repository_path=args.datasets_uri, batch_import_meta_data_on_create=True,
            s3={"auto_import_policy": {"events": IMPORT_EVENTS}}, delete_data_in_filesystem=False, tags=tags, opts=child)
        results = aws.fsx.DataRepositoryAssociation(
            f"{name}-results", file_system_id=fs.id, file_system_path="/results",
            data_repository_path=args.results_uri, s3={"auto_export_policy": {"events": EXPORT_EVENTS}},
            delete_data_in_filesystem=False, tags=tags, opts=child)
        addon = aws.eks.Addon(f"{name}-csi", cluster_name=args.cluster_name, addon_name="aws-fsx-csi-driver",
                              resolve_conflicts_on_create="OVERWRITE", tags=tags,
                              opts=child_options(self, opts, depends_on=args.volume_depends_on))
        cap, env = config.storage_capacity_gib, args.env
        self.claim = register_shared_volume(
            self, opts, name, kind="fsx", env=env, capacity_gib=cap,
            depends_on=[addon, datasets, results, *server_rules, *node_rules, *args.volume_depends_on],
            volume=pulumi.Output.all(fs.id, fs.dns_name, fs.mount_name).apply(
                lambda a: persistent_volume_manifest("fsx", file_system_id=a[0], dns_name=a[1], mount_name=a[2],
                                                     env=env, capacity_gib=cap)))
        self.file_system_id = fs.id
        self.register_outputs({"file_system_id": fs.id})
