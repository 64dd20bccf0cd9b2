"""The training pods' AWS identity: a service account bound to an IAM role by EKS Pod Identity.

The role may read the datasets prefix and read/write the stack's results prefix, nothing
more; no access keys exist anywhere in the cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

import pulumi

from infra import k8s_objects
from infra.access.pod_identity import pod_identity_role
from infra.access.policies import trainer_policy
from infra.cluster.manifests import service_account_manifest
from infra.component_options import child_options
from infra.environment import Environment


@dataclass(frozen=True)
class TrainerIdentityArgs:
    """env: the namespace, service account and datasets URI. cluster_name: for the Pod Identity
    association. bucket: the results bucket. stack_prefix: ``<project>/<stack>/``, the part of the
    bucket the role may write. tags: on every AWS resource. The Kubernetes provider and what the
    service account waits for (namespace, Pod Identity agent) come through ``opts``."""
    env: Environment
    cluster_name: str
    bucket: pulumi.Input[str]
    stack_prefix: str
    tags: Mapping[str, str] = field(default_factory=dict)


class TrainerIdentity(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]
    service_account: pulumi.CustomResource

    def __init__(self, name: str, args: TrainerIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:TrainerIdentity", name, None, opts)
        env, tags = args.env, dict(args.tags)
        child = child_options(self, opts)
        policy = pulumi.Output.from_input(args.bucket).apply(lambda b: json.dumps(trainer_policy(
            results_bucket=b, results_prefix=args.stack_prefix, datasets_uri=env.datasets_uri(b))))
        identity = pod_identity_role(name, policy=policy, policy_name="s3", cluster_name=args.cluster_name,
                                     namespace=env.namespace, service_account=env.service_account, tags=tags,
                                     opts=child)
        self.service_account = k8s_objects.register(f"{name}-sa", service_account_manifest(env), child)
        self.role_arn = identity.role.arn
        self.register_outputs({"role_arn": identity.role.arn})
