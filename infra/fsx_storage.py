"""Shared storage on FSx for Lustre, linked to S3 by data repository associations.

``/datasets`` imports the datasets prefix automatically (lazy load on first read);
``/results`` exports everything written under it to the stack's results prefix, so
results outlive the file system (FACTS: data not exported is lost on deletion).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra import k8s_objects
from infra.cluster_manifests import (
    persistent_volume_claim_manifest,
    persistent_volume_manifest,
    storage_class_manifest,
)
from infra.environment import Environment
from spec.config import Fsx

# Lustre: TCP 988 and 1018-1023 between clients and file servers (AWS FSx for Lustre
# docs, "File system access control with Amazon VPC").
LUSTRE_PORTS = ((988, 988), (1018, 1023))
ALL_EVENTS = ["NEW", "CHANGED", "DELETED"]


def lustre_rules(sg: aws.ec2.SecurityGroup, node_security_group_id, name: str, parent) -> list:
    """Lustre from the nodes and between the file servers, as rules of their own.

    Separate rule resources (not inline ingress) let the file system, which takes ~10 min,
    start at once instead of waiting ~12 min for the cluster's security group to exist.
    """
    opts = pulumi.ResourceOptions(parent=parent)
    rules = []
    for lo, hi in LUSTRE_PORTS:
        rules.append(aws.vpc.SecurityGroupIngressRule(f"{name}-nodes-{lo}", security_group_id=sg.id, ip_protocol="tcp",
                                         from_port=lo, to_port=hi, referenced_security_group_id=node_security_group_id,
                                         description="Lustre from the cluster's nodes", opts=opts))
        rules.append(aws.vpc.SecurityGroupIngressRule(f"{name}-self-{lo}", security_group_id=sg.id, ip_protocol="tcp",
                                         from_port=lo, to_port=hi, referenced_security_group_id=sg.id,
                                         description="Lustre between the file system's servers", opts=opts))
    rules.append(aws.vpc.SecurityGroupEgressRule(f"{name}-self-egress", security_group_id=sg.id, ip_protocol="-1",
                                    referenced_security_group_id=sg.id,
                                    description="Lustre servers to each other", opts=opts))
    return rules


class FsxStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    claim: pulumi.CustomResource

    def __init__(self, name: str, config: Fsx, *, env: Environment, cluster_name: str, vpc_id, subnet_id,
                 node_security_group_id, datasets_uri: pulumi.Input[str], results_uri: pulumi.Input[str],
                 provider, addon_depends_on: list, tags: dict[str, str], opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:FsxStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        sg = aws.ec2.SecurityGroup(f"{name}-sg", vpc_id=vpc_id, description="Lustre from EKS nodes to FSx",
                                   tags=tags, opts=child)
        rules = lustre_rules(sg, node_security_group_id, f"{name}-sg", self)
        persistent = config.deployment_type.startswith("PERSISTENT")
        # Encrypted at rest always (AWS-managed key); 2.15 supports data repository associations.
        fs = aws.fsx.LustreFileSystem(
            # pulumi-aws 7 takes the one subnet a Lustre file system lives in as a string.
            f"{name}-fs", storage_capacity=config.storage_capacity_gib, deployment_type=config.deployment_type,
            per_unit_storage_throughput=config.per_unit_storage_throughput if persistent else None,
            subnet_ids=subnet_id, security_group_ids=[sg.id], file_system_type_version="2.15",
            data_compression_type="LZ4", tags={**tags, "Name": f"{name}-fs"},
            opts=pulumi.ResourceOptions(parent=self, custom_timeouts=pulumi.CustomTimeouts(create="40m")))
        datasets = aws.fsx.DataRepositoryAssociation(
            f"{name}-datasets", file_system_id=fs.id, file_system_path="/datasets",
            data_repository_path=datasets_uri, batch_import_meta_data_on_create=True,
            s3={"auto_import_policy": {"events": ALL_EVENTS}}, delete_data_in_filesystem=False, tags=tags, opts=child)
        results = aws.fsx.DataRepositoryAssociation(
            f"{name}-results", file_system_id=fs.id, file_system_path="/results", data_repository_path=results_uri,
            s3={"auto_export_policy": {"events": ALL_EVENTS}}, delete_data_in_filesystem=False, tags=tags,
            opts=child)
        addon = aws.eks.Addon(f"{name}-csi", cluster_name=cluster_name, addon_name="aws-fsx-csi-driver",
                              resolve_conflicts_on_create="OVERWRITE", tags=tags,
                              opts=pulumi.ResourceOptions(parent=self, depends_on=addon_depends_on))
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[addon, datasets, results, *rules])
        storage_class = k8s_objects.register(f"{name}-sc", storage_class_manifest("fsx"), k8s_opts)
        cap = config.storage_capacity_gib
        pv = k8s_objects.register(
            f"{name}-pv", pulumi.Output.all(fs.id, fs.dns_name, fs.mount_name).apply(
                lambda a: persistent_volume_manifest("fsx", file_system_id=a[0], dns_name=a[1], mount_name=a[2],
                                                     env=env, capacity_gib=cap)),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[storage_class])),
            kind="PersistentVolume")
        self.claim = k8s_objects.register(f"{name}-pvc", persistent_volume_claim_manifest("fsx", env, cap),
                                          pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[pv]))
        self.file_system_id = fs.id
        self.register_outputs({"file_system_id": fs.id})
