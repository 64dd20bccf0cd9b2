"""Autostop, part 3 of 4, the Pulumi component: ``AutostopController`` registers the controller.

The controller scales the run's GPU node groups to zero when it is over (or, for groups Cluster Autoscaler
sizes, suspends the run's unfinished Jobs so the autoscaler can).

Registers the controller's IAM role (``infra.access.policies.autostop_policy``: this cluster's node
groups and one S3 key), its Pod Identity association, its RBAC and NetworkPolicy and the
Deployment (``workloads.autostop_manifests``; the program in ``workloads/train/control/autostop.py``).
Its Deployment comes after the experiments (``AutostopControllerArgs.after``): the run's Jobs exist before it
first looks, so it never sees an empty run that is only about to start. Its other objects wait for what
``opts.depends_on`` names only: a dependency on the experiments is one on each of their objects, and each costs
Pulumi's SDK a walk of what that object depends on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pulumi

from core.contract.results_location import ResultsLocation
from infra import k8s_objects
from infra.access.pod_identity import pod_identity_role
from infra.access.policies import autostop_policy
from infra.component_options import child_options
from workloads import autostop_manifests as m
from workloads.code_manifests import code_config_map_manifest

RECORD = "autostop.json"  # beside the run's results: s3://<bucket>/<project>/<stack>/<run_id>/autostop.json


@dataclass(frozen=True)
class AutostopControllerArgs:
    """namespace, run_id, region: the run. cluster_name and cluster_arn: the cluster whose node groups
    it may resize (cluster_arn scopes the policy). node_groups: the GPU node groups' names.
    bucket: the results bucket; results: the run's place in it (``ResultsLocation``), where the record goes.
    deadline_minutes, idle_minutes: core.config.model.Autostop, resolved. code_files: read_code_files(),
    the same ConfigMap the experiments mount. generation: ``autostop_owner``'s, the one this controller
    serves. tags: on every AWS resource. after: what the Deployment waits for besides its own objects (the
    experiments)."""
    namespace: str
    run_id: str
    region: str
    cluster_name: str
    cluster_arn: pulumi.Input[str]
    node_groups: Sequence[pulumi.Input[str]]
    bucket: pulumi.Input[str]
    results: ResultsLocation
    deadline_minutes: int
    idle_minutes: int
    code_files: Mapping[str, str]
    generation: str = ""
    node_group_sizes: Sequence[Mapping[str, int]] = ()  # each GPU group's configured minSize, maxSize, desiredSize
    suspend_at_deadline: bool = False  # some GPU group is Cluster Autoscaler's: stopping suspends unfinished Jobs
    tags: Mapping[str, str] = field(default_factory=dict)
    after: Sequence[pulumi.Resource] = ()


class AutostopController(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]
    deployment: pulumi.CustomResource

    def __init__(self, name: str, args: AutostopControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:workloads:AutostopController", name, None, opts)
        child, tags, key = child_options(self, opts), dict(args.tags), args.results.key(RECORD)
        rbac = m.autostop_rbac_manifests(args.namespace, suspend_jobs=args.suspend_at_deadline)
        sa, k8s_role, binding = (k8s_objects.register(f"{name}-{r}", o, child) for r, o in
                                 zip(("sa", "rbac-role", "rbac-binding"), rbac))
        policy = pulumi.Output.all(args.cluster_arn, args.bucket).apply(
            lambda a: json.dumps(autostop_policy(cluster_arn=a[0], bucket=a[1], key=key)))
        identity = pod_identity_role(name, policy=policy, policy_name="policy", cluster_name=args.cluster_name,
                                     namespace=args.namespace, service_account=m.NAME, tags=tags, opts=child,
                                     association_opts=child_options(self, opts, depends_on=[sa]))
        k8s_objects.register(f"{name}-network-policy", m.autostop_network_policy_manifest(args.namespace), child)
        code = code_config_map_manifest(args.code_files, namespace=args.namespace)
        spec = pulumi.Output.all(args.bucket, *args.node_groups).apply(lambda a: m.autostop_spec(
            namespace=args.namespace, run_id=args.run_id, cluster=args.cluster_name, node_groups=a[1:],
            region=args.region, bucket=a[0], key=key, deadline_minutes=args.deadline_minutes,
            idle_minutes=args.idle_minutes, generation=args.generation, sizes=args.node_group_sizes,
            suspend_at_deadline=args.suspend_at_deadline))
        manifest = spec.apply(lambda s: m.autostop_deployment_manifest(namespace=args.namespace, spec=s,
                                                                        code_config_map=code))
        # Credentials are handed out only once the association exists; the pod starts after it.
        self.deployment = k8s_objects.register(
            f"{name}-deployment", manifest,
            child_options(self, opts, depends_on=[k8s_role, binding, identity.association, identity.grant, *args.after]),
            kind="Deployment", metadata=m.controller_metadata(args.namespace))
        self.role_arn = identity.role.arn
        self.register_outputs({"role_arn": identity.role.arn})


def autostop_owner(name: str, *, namespace: str, generation: str, run_id: str,
                   opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """The ConfigMap naming the generation that may scale the GPU groups (``m.owner_config_map_manifest``).
    The program makes the GPU node groups depend on it: this `pulumi up` records its generation before it
    restores their sizes, so a controller of an earlier run, still running, stands down first."""
    return k8s_objects.register(name, m.owner_config_map_manifest(namespace=namespace, generation=generation,
                                                                   run_id=run_id), opts)
