"""Shared storage on EFS: an encrypted file system, one mount target per private subnet,
NFS open to the cluster's nodes only, the EFS CSI add-on, and a static RWX volume + claim.
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
from spec.config import Efs

NFS_PORT = 2049


class EfsStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    claim: pulumi.CustomResource

    def __init__(self, name: str, config: Efs, *, env: Environment, cluster_name: str, vpc_id, private_subnet_ids: list,
                 node_security_group_id, provider, addon_depends_on: list, tags: dict[str, str],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:EfsStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # EFS needs NFS (TCP 2049) from the clients; nothing else gets in (AWS EFS docs,
        # "Using VPC security groups").
        # A separate rule resource lets the file system and mount targets start before the cluster exists.
        sg = aws.ec2.SecurityGroup(f"{name}-sg", vpc_id=vpc_id, description="NFS from EKS nodes to EFS",
                                   tags=tags, opts=child)
        nfs = aws.vpc.SecurityGroupIngressRule(f"{name}-sg-nfs", security_group_id=sg.id, ip_protocol="tcp",
                                               from_port=NFS_PORT, to_port=NFS_PORT,
                                               referenced_security_group_id=node_security_group_id,
                                               description="NFS from the cluster's nodes", opts=child)
        fs = aws.efs.FileSystem(f"{name}-fs", encrypted=True, throughput_mode=config.throughput_mode,
                                performance_mode=config.performance_mode,
                                tags={**tags, "Name": f"{name}-fs"}, opts=child)
        mount_targets = [aws.efs.MountTarget(f"{name}-mt-{i}", file_system_id=fs.id, subnet_id=subnet,
                                             security_groups=[sg.id], opts=child)
                         for i, subnet in enumerate(private_subnet_ids)]
        # The add-on's controller needs nodes to run on; created before them it sits DEGRADED.
        addon = aws.eks.Addon(f"{name}-csi", cluster_name=cluster_name, addon_name="aws-efs-csi-driver",
                              resolve_conflicts_on_create="OVERWRITE", tags=tags,
                              opts=pulumi.ResourceOptions(parent=self, depends_on=addon_depends_on))
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[addon, nfs, *mount_targets])
        storage_class = k8s_objects.register(f"{name}-sc", storage_class_manifest("efs"), k8s_opts)
        pv = k8s_objects.register(
            f"{name}-pv", fs.id.apply(lambda fid: persistent_volume_manifest("efs", file_system_id=fid, env=env)),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[storage_class])),
            kind="PersistentVolume")
        self.claim = k8s_objects.register(f"{name}-pvc", persistent_volume_claim_manifest("efs", env),
                                          pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[pv]))
        self.file_system_id = fs.id
        self.mount_target_count = len(mount_targets)
        self.register_outputs({"file_system_id": fs.id})
