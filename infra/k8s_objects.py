"""Registers a Kubernetes manifest dict, or an Output of one, as the typed pulumi-kubernetes resource.

The pure builders stay the single source of truth: this maps the kind to its resource
class and passes each top-level field through (camelCase inside, as the provider expects),
with one rewrite for the API: a pod's container command, args and env values get every ``$``
doubled, so the kubelet's ``$(VAR)`` expansion leaves them as the builders wrote them
(``infra.container_text``). Infra, workloads and datasets all register their objects here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import pulumi
import pulumi_kubernetes as k8s

from infra.container_text import kubelet_literal

# kind -> (resource class, top-level fields besides apiVersion, kind and metadata)
KINDS: dict[str, tuple[type, tuple[str, ...]]] = {
    "Namespace": (k8s.core.v1.Namespace, ("spec",)),
    "ServiceAccount": (k8s.core.v1.ServiceAccount, ("automountServiceAccountToken", "imagePullSecrets", "secrets")),
    "Service": (k8s.core.v1.Service, ("spec",)),
    "ConfigMap": (k8s.core.v1.ConfigMap, ("data", "binaryData", "immutable")),
    "PersistentVolume": (k8s.core.v1.PersistentVolume, ("spec",)),
    "PersistentVolumeClaim": (k8s.core.v1.PersistentVolumeClaim, ("spec",)),
    "Deployment": (k8s.apps.v1.Deployment, ("spec",)),
    "DaemonSet": (k8s.apps.v1.DaemonSet, ("spec",)),
    "Job": (k8s.batch.v1.Job, ("spec",)),
    "StorageClass": (k8s.storage.v1.StorageClass, ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode",
                                                   "mountOptions", "allowVolumeExpansion", "allowedTopologies")),
    "Role": (k8s.rbac.v1.Role, ("rules",)),
    "RoleBinding": (k8s.rbac.v1.RoleBinding, ("roleRef", "subjects")),
    "NetworkPolicy": (k8s.networking.v1.NetworkPolicy, ("spec",)),
    "PodDisruptionBudget": (k8s.policy.v1.PodDisruptionBudget, ("spec",)),
    "PriorityClass": (k8s.scheduling.v1.PriorityClass, ("value", "globalDefault", "description", "preemptionPolicy")),
}


def _argument(field: str) -> str:
    """Top-level fields are constructor arguments in snake_case (``roleRef`` -> ``role_ref``)."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", field).lower()


def register(name: str, manifest: Mapping[str, Any] | pulumi.Output, opts: pulumi.ResourceOptions, *,
             kind: str | None = None, metadata: Mapping[str, Any] | None = None) -> pulumi.CustomResource:
    """Register ``manifest`` as ``name``.

    Where the manifest depends on other resources' outputs, pass it as an Output and name
    its ``kind``; give ``metadata`` too when it is known without them, so the object's name
    shows in a preview. Every manifest passes through ``kubelet_literal`` here, and only here.
    """
    if isinstance(manifest, pulumi.Output):
        if kind is None:
            raise TypeError(f"{name}: an Output manifest needs kind=")
        cls, fields = KINDS[kind]
        manifest = manifest.apply(lambda m: kubelet_literal(m, kind))
        meta = metadata if metadata is not None else manifest.apply(lambda m: m["metadata"])
        args = {_argument(f): manifest.apply(lambda m, f=f: m.get(f)) for f in fields}
        return cls(name, metadata=meta, **args, opts=opts)
    cls, fields = KINDS[manifest["kind"]]
    manifest = kubelet_literal(manifest)
    unknown = set(manifest) - {"apiVersion", "kind", "metadata", *fields}
    if unknown:
        raise ValueError(f"{name}: {manifest['kind']} fields {sorted(unknown)} are not in k8s_objects.KINDS")
    return cls(name, metadata=metadata or manifest["metadata"],
               **{_argument(f): manifest[f] for f in fields if f in manifest}, opts=opts)
