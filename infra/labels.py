"""The labels and annotations every Kubernetes object of eksbench carries, built in one place.

``labels(...)`` gives the recommended ``app.kubernetes.io/*`` set (Kubernetes docs,
"Recommended Labels") plus eksbench's own keys; ``SKIP_AWAIT`` is the pulumi-kubernetes
annotation that makes ``pulumi up`` return once an object exists instead of waiting for it
(pulumi-kubernetes docs, "pulumi.com/skipAwait").
"""

from __future__ import annotations

from typing import Mapping

SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"
SKIP_AWAIT = {SKIP_AWAIT_ANNOTATION: "true"}
COMPONENT_LABEL = "app.kubernetes.io/component"
BASE = {"app.kubernetes.io/part-of": "eksbench", "app.kubernetes.io/managed-by": "pulumi"}


def labels(name: str = "eksbench", *, component: str | None = None, instance: str | None = None,
           extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``app.kubernetes.io/{name,part-of,managed-by}`` plus component, instance and ``extra`` where given."""
    out = {"app.kubernetes.io/name": name, **BASE}
    if instance:
        out["app.kubernetes.io/instance"] = instance
    if component:
        out[COMPONENT_LABEL] = component
    return {**out, **(extra or {})}


def metadata(name: str, namespace: str | None = None, *, label_set: Mapping[str, str] | None = None,
             annotations: Mapping[str, str] | None = None) -> dict:
    """An object's metadata: name, namespace where namespaced, labels (default ``labels()``), annotations."""
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(label_set if label_set is not None else labels())
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta
