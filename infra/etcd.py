"""etcd for torch elastic rendezvous: one pinned 3.5 member with the v2 API, a ClusterIP Service."""

from __future__ import annotations

import pulumi

from infra import k8s_objects
from infra.cluster_manifests import etcd_manifests
from infra.environment import Environment


class Etcd(pulumi.ComponentResource):
    endpoint: str

    def __init__(self, name: str, *, env: Environment, provider, depends_on: list,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:Etcd", name, None, opts)
        deployment, service = etcd_manifests(env)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on)
        self.deployment = k8s_objects.register(f"{name}-deployment", deployment, k8s_opts)
        self.service = k8s_objects.register(f"{name}-service", service, k8s_opts)
        self.endpoint = env.etcd_endpoint
        self.register_outputs({"endpoint": self.endpoint})
