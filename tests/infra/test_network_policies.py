"""The namespace's NetworkPolicies and the vpc-cni setting that enforces them."""


import pytest

from infra.access.network_policies import PEERS_LABEL, namespace_network_policies
from infra.environment import ETCD_PORT
from tests.support.k8s_schema import assert_valid


def selects(selector: dict, pod_labels: dict) -> bool:
    """Kubernetes LabelSelector semantics for matchLabels and In/NotIn/Exists/DoesNotExist."""
    if any(pod_labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        has, value = e["key"] in pod_labels, pod_labels.get(e["key"])
        ok = {"Exists": has, "DoesNotExist": not has, "In": value in e.get("values", []),
              "NotIn": value not in e.get("values", [])}[e["operator"]]
        if not ok:
            return False
    return True


def admitted(policies: list[dict], source: dict, dest: dict, port: int) -> bool:
    """Whether ``source`` may open ``port`` on ``dest`` (same namespace) under ``policies``."""
    applying = [p for p in policies if selects(p["spec"]["podSelector"], dest) and "Ingress" in p["spec"]["policyTypes"]]
    if not applying:
        return True
    for p in applying:
        for rule in p["spec"].get("ingress", []):
            peers_ok = not rule.get("from") or any(selects(f["podSelector"], source) for f in rule["from"])
            ports_ok = not rule.get("ports") or any(r["port"] == port for r in rule["ports"])
            if peers_ok and ports_ok:
                return True
    return False


BASE = {"app.kubernetes.io/part-of": "eksbench", "app.kubernetes.io/managed-by": "pulumi"}
ETCD = {**BASE, "app.kubernetes.io/name": "etcd"}
TRAINER = {**BASE, "app.kubernetes.io/name": "eksbench", "app.kubernetes.io/component": "training",
           PEERS_LABEL: "cifar10-elastic-run-001"}
OTHER_TRAINER = {**TRAINER, PEERS_LABEL: "resnet50-synthetic-run-001"}
PSERVER = {**TRAINER, "app.kubernetes.io/component": "pserver"}
STAGING = {**BASE, "app.kubernetes.io/component": "dataset-staging", "eksbench.io/dataset": "cifar10"}
GATE = {**BASE, "app.kubernetes.io/component": "gate"}
EVAL = {**BASE, "app.kubernetes.io/component": "evaluation"}
STRANGER = {"app": "something-else"}


@pytest.fixture(scope="module")
def policies():
    return namespace_network_policies("eksbench")


def test_policies_are_schema_valid(policies):
    assert [p["metadata"]["name"] for p in policies] == ["default-deny-ingress", "etcd-clients", "experiment-peers"]
    for p in policies:
        assert_valid(p)
        assert p["metadata"]["namespace"] == "eksbench"


def test_only_experiment_pods_reach_etcd_and_only_on_its_client_port(policies):
    assert admitted(policies, TRAINER, ETCD, ETCD_PORT)
    assert admitted(policies, PSERVER, ETCD, ETCD_PORT)
    for other in (STAGING, GATE, EVAL, STRANGER):
        assert not admitted(policies, other, ETCD, ETCD_PORT), other
    assert not admitted(policies, TRAINER, ETCD, 2380)  # the peer port stays closed


def test_training_pods_reach_each_other_on_any_port(policies):
    for port in (29400, 29500, 40123, 2222):  # c10d, torchrun master, an NCCL port, paddle
        assert admitted(policies, TRAINER, TRAINER, port)
        assert admitted(policies, TRAINER, PSERVER, port)
    assert not admitted(policies, STAGING, TRAINER, 29500)
    assert not admitted(policies, STRANGER, TRAINER, 29500)


def test_everything_else_is_closed_for_ingress(policies):
    for dest in (STAGING, GATE, EVAL):
        assert not admitted(policies, TRAINER, dest, 8080)


def test_policies_reach_only_their_own_namespace(policies):
    for p in policies:
        for rule in p["spec"].get("ingress", []):
            assert all("namespaceSelector" not in f and "ipBlock" not in f for f in rule["from"])
