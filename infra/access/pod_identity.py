"""An IAM role that one Kubernetes service account assumes through EKS Pod Identity.

The role trusts ``pods.eks.amazonaws.com`` only (``policies.pod_identity_trust_policy``), holds
one inline policy, and is bound to the service account by a ``PodIdentityAssociation``: no access
keys exist anywhere in the cluster. A factory for the components that own such a role (the
trainers', the autostop controller's); its children are named ``<name>-role``,
``<name>-<policy_name>`` and ``<name>-association``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

import pulumi
import pulumi_aws as aws

from infra.access.policies import pod_identity_trust_policy


@dataclass(frozen=True)
class PodIdentityRole:
    role: aws.iam.Role
    grant: aws.iam.RolePolicy
    association: aws.eks.PodIdentityAssociation


def pod_identity_role(name: str, *, policy: pulumi.Input[str], policy_name: str, cluster_name: pulumi.Input[str],
                      namespace: str, service_account: str, tags: Mapping[str, str], opts: pulumi.ResourceOptions,
                      association_opts: pulumi.ResourceOptions | None = None) -> PodIdentityRole:
    """The role with ``policy`` (a JSON document) and its association; ``association_opts`` (default
    ``opts``) lets the association wait for the service account."""
    role = aws.iam.Role(f"{name}-role", assume_role_policy=json.dumps(pod_identity_trust_policy()),
                        tags=dict(tags), opts=opts)
    grant = aws.iam.RolePolicy(f"{name}-{policy_name}", role=role.id, policy=policy, opts=opts)
    association = aws.eks.PodIdentityAssociation(
        f"{name}-association", cluster_name=cluster_name, namespace=namespace, service_account=service_account,
        role_arn=role.arn, tags=dict(tags), opts=association_opts or opts)
    return PodIdentityRole(role, grant, association)
