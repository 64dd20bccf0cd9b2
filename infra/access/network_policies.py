"""NetworkPolicies of the experiment namespace, and the add-on setting that enforces them (pure).

The namespace gets a default-deny for ingress plus two allows:

- ``etcd-clients``: only pods that take part in an experiment (label ``eksbench.io/peers``,
  set on every pod of a training Job, trainers and paddle pservers alike) reach etcd, and only
  on its client port. etcd has neither TLS nor auth (torch's etcd-v2 rendezvous speaks plain
  HTTP), so this is what keeps every other pod of the cluster away from it.
- ``experiment-peers``: pods of experiments accept any port from each other: torchrun's c10d
  store, TF/paddle ports and NCCL, which opens arbitrary ports.

Nothing else inbound is needed: staging, gate and evaluation pods only open connections.
Kubelet probes are not affected: a NetworkPolicy never blocks traffic from the pod's own node
(Kubernetes API reference, NetworkPolicySpec.ingress: "OR if the traffic source is the pod's
local node"), and the VPC CNI's network policy agent allows the node IP
(aws/aws-network-policy-agent PR #65, in VPC CNI v1.15.1).

Policies are enforced on EKS only when the ``vpc-cni`` add-on runs its network policy
agent (EKS user guide, "Restrict Pod network traffic with Kubernetes network policies"; VPC
CNI 1.14 or later): ``infra.cluster.eks`` turns it on through pulumi-eks' ``vpc_cni_options``.
"""

from __future__ import annotations

import copy

from core.contract.names import PEERS_LABEL
from infra.environment import ETCD_PORT
from infra.labels import labels, metadata

ETCD_SELECTOR = {"app.kubernetes.io/name": "etcd"}  # infra.cluster.manifests.etcd_manifests
EXPERIMENT_PODS = {"matchLabels": {"app.kubernetes.io/part-of": "eksbench"},
                   "matchExpressions": [{"key": PEERS_LABEL, "operator": "Exists"}]}


def _policy(name: str, namespace: str, spec: dict) -> dict:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": metadata(name, namespace, label_set=labels(component="network-policy")), "spec": spec}


def default_deny_ingress_manifest(namespace: str) -> dict:
    """Every pod of the namespace is isolated for ingress; the other policies are the exceptions."""
    return _policy("default-deny-ingress", namespace, {"podSelector": {}, "policyTypes": ["Ingress"]})


def etcd_client_policy_manifest(namespace: str) -> dict:
    """etcd admits experiment pods of its own namespace on the client port, and nothing else."""
    return _policy("etcd-clients", namespace, {
        "podSelector": {"matchLabels": dict(ETCD_SELECTOR)}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": copy.deepcopy(EXPERIMENT_PODS)}],
                     "ports": [{"protocol": "TCP", "port": ETCD_PORT}]}]})


def experiment_peers_policy_manifest(namespace: str) -> dict:
    """Experiment pods accept every port from experiment pods (NCCL picks its ports at random)."""
    return _policy("experiment-peers", namespace, {
        "podSelector": copy.deepcopy(EXPERIMENT_PODS), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": copy.deepcopy(EXPERIMENT_PODS)}]}]})


def namespace_network_policies(namespace: str) -> list[dict]:
    return [default_deny_ingress_manifest(namespace), etcd_client_policy_manifest(namespace),
            experiment_peers_policy_manifest(namespace)]


# The EKS add-on's configuration schema takes strings for these flags ("true", not true).
