"""Shared storage on EFS: an encrypted file system, one mount target per private subnet,
NFS open to the cluster's nodes only, the EFS CSI add-on, and a static RWX volume + claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pulumi
import pulumi_aws as aws

from core.config.model import Efs
from infra.access.pod_security import RUN_AS_USER
from infra.cluster.manifests import persistent_volume_manifest
from infra.component_options import child_options
from infra.environment import Environment
from infra.storage.shared_volume import register_shared_volume

NFS_PORT = 2049


@dataclass(frozen=True)
class EfsStorageArgs:
    """config: throughput and performance mode. env: the claim and namespace the volume is for.
    cluster_name: the EKS cluster the CSI add-on goes to. vpc_id, subnet_ids: one mount target per subnet.
    node_security_group_id: the security group the nodes carry; only it may reach NFS.
    volume_depends_on: what the CSI add-on and the Kubernetes volume objects wait for (the nodes the
    controller runs on, the namespace); the file system itself starts at once. tags: on every AWS resource.
    The Kubernetes provider comes through ``opts``."""
    config: Efs
    env: Environment
    cluster_name: str
    vpc_id: pulumi.Input[str]
    subnet_ids: Sequence[pulumi.Input[str]]
    node_security_group_id: pulumi.Input[str]
    volume_depends_on: Sequence[Any] = ()
    tags: Mapping[str, str] = field(default_factory=dict)


class EfsStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    claim: pulumi.CustomResource

    def __init__(self, name: str, args: EfsStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:EfsStorage", name, None, opts)
        tags = dict(args.tags)
        child = child_options(self, opts)
        # EFS needs NFS (TCP 2049) from the clients; nothing else gets in (AWS EFS docs,
        # "Using VPC security groups").
        # A separate rule resource lets the file system and mount targets start before the cluster exists.
        sg = aws.ec2.SecurityGroup(f"{name}-sg", vpc_id=args.vpc_id, description="NFS from EKS nodes to EFS",
                                   tags=tags, opts=child)
        nfs = aws.vpc.SecurityGroupIngressRule(f"{name}-sg-nfs", security_group_id=sg.id, ip_protocol="tcp",
                                               from_port=NFS_PORT, to_port=NFS_PORT,
                                               referenced_security_group_id=args.node_security_group_id,
                                               description="NFS from the cluster's nodes", tags=tags, opts=child)
        fs = aws.efs.FileSystem(f"{name}-fs", encrypted=True, throughput_mode=args.config.throughput_mode,
                                performance_mode=args.config.performance_mode,
                                tags={**tags, "Name": f"{name}-fs"}, opts=child)
        mount_targets = [aws.efs.MountTarget(f"{name}-mt-{i}", file_system_id=fs.id, subnet_id=subnet,
                                             security_groups=[sg.id], opts=child)
                         for i, subnet in enumerate(args.subnet_ids)]
        # Pods run as RUN_AS_USER (infra/access/pod_security.py), and a new file system's root is root:root 0755:
        # every mount goes through an access point whose POSIX user is that UID, rooted at a directory
        # EFS creates owned by it (AWS EFS docs, "Working with access points"). Root in a pod (EFA) is
        # mapped to the same user, so every file on the volume has one owner.
        access_point = aws.efs.AccessPoint(
            f"{name}-ap", file_system_id=fs.id, posix_user={"uid": RUN_AS_USER, "gid": RUN_AS_USER},
            root_directory={"path": "/eksbench", "creation_info": {
                "owner_uid": RUN_AS_USER, "owner_gid": RUN_AS_USER, "permissions": "0750"}},
            tags={**tags, "Name": f"{name}-ap"}, opts=child)
        # The add-on's controller needs nodes to run on; created before them it sits DEGRADED.
        addon = aws.eks.Addon(f"{name}-csi", cluster_name=args.cluster_name, addon_name="aws-efs-csi-driver",
                              resolve_conflicts_on_create="OVERWRITE", tags=tags,
                              opts=child_options(self, opts, depends_on=args.volume_depends_on))
        env = args.env
        self.claim = register_shared_volume(
            self, opts, name, kind="efs", env=env,
            depends_on=[addon, nfs, *mount_targets, *args.volume_depends_on],
            volume=pulumi.Output.all(fs.id, access_point.id).apply(
                lambda ids: persistent_volume_manifest("efs", file_system_id=ids[0], access_point_id=ids[1], env=env)))
        self.file_system_id = fs.id
        self.register_outputs({"file_system_id": fs.id})
