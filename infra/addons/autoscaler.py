"""Cluster Autoscaler for the GPU groups that opt in (``gpu_node_groups[].autoscale``), from its Helm chart.

On the system nodes in ``kube-system``, finding its groups by a tag of ours that only the opted-in groups'
Auto Scaling groups carry (``AUTOSCALER_DISCOVERY_TAG/<cluster>``, set by ``infra.cluster.node_group``: the
chart's ``autoDiscovery.tags``), with the AWS rights of ``policies.cluster_autoscaler_policy`` through EKS
Pod Identity, which scale only groups carrying that tag. Not the chart's default tags
(``k8s.io/cluster-autoscaler/enabled``, ``k8s.io/cluster-autoscaler/<cluster>``): EKS puts those on every
managed node group's Auto Scaling group, so the autoscaler would take every GPU group, shrink the fixed ones
to their min_size of 0 between experiments, and, knowing nothing of an EFA group's node-template tags, judge
that its pods fit nowhere. The chart and image are pinned per Kubernetes minor (``core.catalog.pins``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

import pulumi
import pulumi_kubernetes as k8s

from core.catalog.pins import CLUSTER_AUTOSCALER_CHARTS, CLUSTER_AUTOSCALER_REPOSITORY
from core.contract.names import AUTOSCALER_DISCOVERY_TAG
from infra.cluster.autoscaling import SCALE_DOWN_ARGS
from infra.access.pod_identity import pod_identity_role
from infra.access.policies import cluster_autoscaler_policy
from infra.component_options import child_options
from infra.environment import SYSTEM_NODE_LABEL

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"


def chart_values(*, cluster_name: str, region: str, kubernetes_version: str) -> dict:
    """The chart's values (cluster-autoscaler/charts/cluster-autoscaler/values.yaml, chart 9.59.0): AWS,
    auto-discovery of the opted-in groups (``autoDiscovery.tags``, which templates/deployment.yaml joins into
    ``--node-group-auto-discovery=asg:tag=...``; ``clusterName`` must be set for it to be used), our service
    account name (Pod Identity binds to it), the system nodes, and the image of the cluster's minor."""
    _, app = CLUSTER_AUTOSCALER_CHARTS[".".join(kubernetes_version.split(".")[:2])]
    return {"cloudProvider": "aws", "awsRegion": region,
            "autoDiscovery": {"clusterName": cluster_name, "tags": [f"{AUTOSCALER_DISCOVERY_TAG}/{cluster_name}"]},
            "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
            "nodeSelector": dict(SYSTEM_NODE_LABEL), "image": {"tag": f"v{app}"}, "extraArgs": dict(SCALE_DOWN_ARGS)}


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    """cluster_name / cluster_arn: Outputs of the cluster. kubernetes_version: the cluster's (a pinned minor,
    checked at plan time). tags: on the IAM role and the association."""
    cluster_name: pulumi.Input[str]
    cluster_arn: pulumi.Input[str]
    region: str
    kubernetes_version: str
    tags: Mapping[str, str] = field(default_factory=dict)


class ClusterAutoscaler(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:addons:ClusterAutoscaler", name, None, opts)
        child = child_options(self, opts)
        policy = pulumi.Output.all(args.cluster_name, args.cluster_arn).apply(
            lambda a: json.dumps(cluster_autoscaler_policy(cluster_name=a[0], cluster_arn=a[1])))
        identity = pod_identity_role(f"{name}-identity", policy=policy, policy_name="scale", cluster_name=args.cluster_name,
                                     namespace=NAMESPACE, service_account=SERVICE_ACCOUNT, tags=args.tags,
                                     opts=child)
        chart, _ = CLUSTER_AUTOSCALER_CHARTS[".".join(args.kubernetes_version.split(".")[:2])]
        values = pulumi.Output.from_input(args.cluster_name).apply(lambda c: chart_values(
            cluster_name=c, region=args.region, kubernetes_version=args.kubernetes_version))
        self.release = k8s.helm.v3.Release(
            f"{name}-release", chart="cluster-autoscaler", version=chart, namespace=NAMESPACE,
            repository_opts={"repo": CLUSTER_AUTOSCALER_REPOSITORY}, values=values,
            # Its first AWS call needs the role bound to its service account.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[identity.association])))
        self.register_outputs({})
