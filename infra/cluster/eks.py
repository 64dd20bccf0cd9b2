"""The EKS control plane, the node IAM role, the Kubernetes provider and the namespace.

Authentication mode API with access entries (no aws-auth ConfigMap); private endpoint
access on, public access only from the configured CIDRs; no default node group (the
node groups are their own components). The ``k8s.Provider`` is built from the
cluster's kubeconfig and passed explicitly everywhere: pulumi-eks 4 has no usable
``Cluster.provider`` in Python, and a missing provider silently targets the ambient
kubeconfig (pulumi-eks 4 Python SDK: ``Cluster`` exposes ``core`` and ``kubeconfig_json``, no
provider attribute; pulumi-kubernetes docs, "Provider: kubeconfig").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from core.config.model import Cluster as ClusterConfig
from infra import k8s_objects
from infra.access.policies import NODE_ROLE_POLICIES, assume_role_policy
from infra.cluster.manifests import namespace_manifest
from infra.component_options import child_options

CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


@dataclass(frozen=True)
class EksClusterArgs:
    """config: version, public CIDRs, admins, log types. cluster_name: the EKS cluster's name.
    namespace: the Kubernetes namespace to create for the stack's workloads. vpc_id and the
    subnet ids: from the network. tags: on every AWS resource."""
    config: ClusterConfig
    cluster_name: str
    namespace: str
    vpc_id: pulumi.Input[str]
    public_subnet_ids: Sequence[pulumi.Input[str]]
    private_subnet_ids: Sequence[pulumi.Input[str]]
    tags: Mapping[str, str] = field(default_factory=dict)


LOG_RETENTION_DAYS = 30


class EksCluster(pulumi.ComponentResource):
    cluster: eks.Cluster
    cluster_name: str
    node_role: aws.iam.Role
    node_role_policies: list[aws.iam.RolePolicyAttachment]
    provider: k8s.Provider
    namespace: pulumi.CustomResource
    ready_cluster_name: pulumi.Output[str]
    node_security_group_id: pulumi.Output[str]
    cluster_arn: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:EksCluster", name, None, opts)
        self.cluster_name = args.cluster_name
        self.node_role, self.node_role_policies = self._node_role(name, args, opts)
        self.cluster = self._core(name, args, opts)
        self._read_created()
        self.kubeconfig = pulumi.Output.secret(self.cluster.kubeconfig_json)
        self._addons(name, args, opts)
        self.register_outputs({"cluster_name": self.cluster_name, "kubeconfig": self.kubeconfig})

    def _node_role(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None,
                   ) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
        """The nodes' IAM role and its policy attachments."""
        child = child_options(self, opts)
        role = aws.iam.Role(f"{name}-node-role", assume_role_policy=json.dumps(
            assume_role_policy("ec2.amazonaws.com")), tags=dict(args.tags), opts=child)
        # Node groups wait for these (NodeGroupArgs.node_role_policies), so that at destroy they go first.
        return role, [aws.iam.RolePolicyAttachment(f"{name}-node-role-{i}", role=role.name, policy_arn=arn, opts=child)
                      for i, arn in enumerate(NODE_ROLE_POLICIES)]

    def _core(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None) -> eks.Cluster:
        """The control-plane log group, then the control plane with its admins' access entries (pulumi-eks' core)."""
        config, cluster_name, tags = args.config, args.cluster_name, dict(args.tags)
        admins = {f"admin-{i}": eks.AccessEntryArgs(
            principal_arn=arn, access_policies={"admin": eks.AccessPolicyAssociationArgs(
                policy_arn=CLUSTER_ADMIN_POLICY, access_scope={"type": "cluster"})})
            for i, arn in enumerate(config.admin_role_arns)}
        # EKS writes control-plane logs to this group, creating it without retention (and leaving it
        # behind on delete) when it does not exist yet (EKS user guide, "Send control plane logs to
        # CloudWatch Logs"). Created first, it has a retention and goes with `pulumi destroy`. The name
        # is fixed by EKS, so a replacement must delete the old group first.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs", name=f"/aws/eks/{cluster_name}/cluster", retention_in_days=LOG_RETENTION_DAYS,
            tags=tags, opts=child_options(self, opts, delete_before_replace=True))
        public_cidrs = list(config.public_access_cidrs or [])
        return eks.Cluster(
            f"{name}-eks", name=cluster_name, version=config.kubernetes_version, vpc_id=args.vpc_id,
            public_subnet_ids=list(args.public_subnet_ids), private_subnet_ids=list(args.private_subnet_ids),
            node_associate_public_ip_address=False, endpoint_private_access=True,
            # [] in config: no public endpoint at all (program.validation made the choice explicit).
            endpoint_public_access=bool(public_cidrs), public_access_cidrs=public_cidrs or None,
            authentication_mode=eks.AuthenticationMode.API, access_entries=admins,
            # No instance_roles: pulumi-eks creates an EC2_LINUX access entry only for `instanceRole`
            # (its defaultInstanceRole), never for `instanceRoles` (pulumi-eks cluster.ts,
            # createCore: "This additionally maps the defaultInstanceRole to a EC2_LINUX access entry").
            # Managed node groups need none from us: "If you create a managed node group ... Amazon EKS
            # creates an access entry of type EC2_LINUX for the node IAM role" (EKS user guide,
            # "Create access entries"), and pulumi-eks does not require instanceRoles in API mode.
            skip_default_node_group=True, create_oidc_provider=False,
            # NetworkPolicies (etcd's, infra/access/network_policies.py) are enforced only with the VPC
            # CNI's network policy agent on (EKS user guide, "Restrict Pod network traffic with Kubernetes
            # network policies"; VPC CNI >= 1.14); pulumi-eks manages the vpc-cni add-on and exposes it here.
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
            enabled_cluster_log_types=list(config.log_types), tags=tags,
            opts=child_options(self, opts, depends_on=[self.node_role, log_group]))

    def _read_created(self) -> None:
        """What EKS made for the cluster: the name once it exists, the nodes' security group, the cluster's ARN."""
        cluster_name = self.cluster_name
        # The security group the nodes carry is the one EKS creates for the cluster
        # (vpcConfig.clusterSecurityGroupId): managed nodes without security groups in their launch
        # template get it, and pulumi-eks puts it on EFA interfaces (nodegroup.ts,
        # getEfaNetworkInterfaces({securityGroupIds: [core.cluster.vpcConfig.clusterSecurityGroupId]})).
        # `cluster.cluster_security_group_id` is NOT it: that is pulumi-eks' own group on the control-plane
        # ENIs unless skipDefaultSecurityGroups (cluster.ts: `core.clusterSecurityGroup?.id ??
        # core.cluster.vpcConfig.clusterSecurityGroupId`).
        # Read through the getCluster invoke rather than `cluster.eks_cluster.vpc_config`: the invoke is
        # right on the real engine (it runs once the name resolves, which the kubeconfig does only after
        # the cluster exists; during preview both stay unknown) and the mock engine answers it with
        # pulumi-aws' GetClusterResult shape, whereas resource references, which eks_cluster needs, are
        # off under mocks (program.mocks). The same name Output orders the node groups after the cluster.
        self.ready_cluster_name = self.cluster.kubeconfig_json.apply(lambda _: cluster_name)
        created = aws.eks.get_cluster_output(name=self.ready_cluster_name, opts=pulumi.InvokeOutputOptions(parent=self))
        self.node_security_group_id = created.vpc_config.cluster_security_group_id
        self.cluster_arn = created.arn  # for policies scoped to this cluster (its node groups)

    def _addons(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None) -> None:
        """The Kubernetes provider from the cluster's kubeconfig, the Pod Identity agent and the stack's namespace."""
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.cluster.kubeconfig_json,
                                     enable_server_side_apply=True, opts=child_options(self, opts))
        # Pod Identity instead of IRSA or keys: no OIDC provider, credentials per service account.
        self.pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent", cluster_name=self.cluster_name, addon_name="eks-pod-identity-agent",
            resolve_conflicts_on_create="OVERWRITE", tags=dict(args.tags),
            opts=child_options(self, opts, depends_on=[self.cluster]))
        self.namespace = k8s_objects.register(f"{name}-namespace", namespace_manifest(args.namespace),
                                              child_options(self, opts, provider=self.provider))
