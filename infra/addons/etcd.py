"""etcd for torch elastic rendezvous: one pinned 3.5 member with the v2 API, a ClusterIP Service,
and the namespace's NetworkPolicies that keep everything but the experiment pods away from it."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra import k8s_objects
from infra.access.network_policies import namespace_network_policies
from infra.cluster.manifests import etcd_manifests, etcd_protection_manifests
from infra.component_options import child_options
from infra.environment import Environment


@dataclass(frozen=True)
class EtcdArgs:
    """env: the namespace and the endpoint name. The Kubernetes provider and what etcd waits for
    (namespace, system nodes) come through ``opts``."""
    env: Environment


class Etcd(pulumi.ComponentResource):
    endpoint: str

    def __init__(self, name: str, args: EtcdArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:Etcd", name, None, opts)
        # The policies first, so etcd never serves a moment without them (enforced by the VPC CNI's
        # network policy agent, which infra.cluster.eks turns on).
        self.network_policies = [
            k8s_objects.register(f"{name}-{p['metadata']['name']}", p, child_options(self, opts))
            for p in namespace_network_policies(args.env.namespace)]
        deployment, service = etcd_manifests(args.env)
        priority, pdb = etcd_protection_manifests(args.env)
        self.priority_class = k8s_objects.register(f"{name}-priority", priority, child_options(self, opts))
        self.disruption_budget = k8s_objects.register(f"{name}-pdb", pdb, child_options(self, opts))
        self.deployment = k8s_objects.register(
            f"{name}-deployment", deployment,
            child_options(self, opts, depends_on=[*self.network_policies, self.priority_class]))
        self.service = k8s_objects.register(f"{name}-service", service, child_options(self, opts))
        self.endpoint = args.env.etcd_endpoint
        self.register_outputs({"endpoint": self.endpoint})
