"""The scheduler's pod anti-affinity, as far as the pod sandbox needs it: which node each pod gets.

The sandbox runs every pod on this one machine and does not enforce ``resources``, so without a
rule every pod would fit on one node. ``Nodes.bind`` puts a pod on the first node where no
running pod's required anti-affinity term matches it and none of its own terms matches a running
pod there (kube-scheduler's InterPodAffinity filter: the incoming pod's anti-affinity and the
existing pods' anti-affinity, kubernetes/kubernetes pkg/scheduler/framework/plugins/
interpodaffinity/filtering.go). Modelled: ``requiredDuringSchedulingIgnoredDuringExecution``
terms with ``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists, DoesNotExist), the
pod's own namespace, topologyKey ``kubernetes.io/hostname``; anything else is refused as not
modelled. Capacity is not: a node takes any number of pods that the rules let in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

HOSTNAME = "kubernetes.io/hostname"


def _expression_holds(expr: Mapping, labels: Mapping[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values", [])
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise AssertionError(f"labelSelector operator {op!r} is not modelled")


def selector_matches(selector: Mapping, labels: Mapping[str, str]) -> bool:
    """A LabelSelector: every matchLabels pair and every matchExpressions requirement hold."""
    if not selector:
        return False  # an empty or null selector in an affinity term matches no pods
    return (all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
            and all(_expression_holds(x, labels) for x in selector.get("matchExpressions", [])))


def anti_affinity_terms(pod_spec: Mapping) -> list[dict]:
    """The pod's required anti-affinity terms; a term the sandbox cannot model is refused."""
    terms = ((pod_spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])
    for t in terms:
        if t.get("topologyKey") != HOSTNAME or t.get("namespaces") or t.get("namespaceSelector"):
            raise AssertionError(f"anti-affinity term {t} is not modelled (hostname topology, own namespace)")
    return list(terms)


@dataclass
class Placed:
    name: str
    labels: dict[str, str]
    terms: list[dict]


@dataclass
class Nodes:
    """The GPU group's nodes as the scheduler sees them: which running pods each one holds."""
    count: int = 64
    pods: dict[str, list[Placed]] = field(default_factory=dict)

    def _fits(self, pod: Placed, node: str) -> bool:
        there = self.pods.get(node, [])
        repels = any(selector_matches(t["labelSelector"], p.labels) for t in pod.terms for p in there)
        repelled = any(selector_matches(t["labelSelector"], pod.labels) for p in there for t in p.terms)
        return not (repels or repelled)

    def bind(self, name: str, labels: Mapping[str, str], pod_spec: Mapping) -> str:
        """The node ``name`` runs on; AssertionError when no node of ``count`` admits it."""
        pod = Placed(name, dict(labels), anti_affinity_terms(pod_spec))
        for i in range(self.count):
            node = f"node-{i}"
            if self._fits(pod, node):
                self.pods.setdefault(node, []).append(pod)
                return node
        raise AssertionError(f"pod {name}: no node of {self.count} admits it (anti-affinity)")

    def release(self, name: str) -> None:
        """A pod that ended leaves its node: terminated pods count for no rule."""
        for placed in self.pods.values():
            placed[:] = [p for p in placed if p.name != name]


def place(pods: list[tuple[str, Mapping[str, str], Mapping]], *, count: int = 64) -> dict[str, str]:
    """Each of ``pods`` (name, labels, pod spec), bound in order while all run at once: name -> node."""
    nodes = Nodes(count)
    return {name: nodes.bind(name, labels, spec) for name, labels, spec in pods}
