"""The Kubernetes side of shared storage, the same for EFS and FSx: StorageClass, static PV, claim.

Both storage components register their file system's volume through ``register_shared_volume``;
the manifests come from ``infra.cluster_manifests``.
"""

from __future__ import annotations

from typing import Any, Sequence

import pulumi

from infra import k8s_objects
from infra.cluster_manifests import persistent_volume_claim_manifest, storage_class_manifest
from infra.component_options import child_options
from infra.environment import Environment


def register_shared_volume(parent: pulumi.ComponentResource, opts: pulumi.ResourceOptions | None, name: str, *,
                           kind: str, volume: pulumi.Output, env: Environment, capacity_gib: int = 1200,
                           depends_on: Sequence[Any] = ()) -> pulumi.CustomResource:
    """StorageClass, then the PersistentVolume ``volume`` (an Output of its manifest), then the claim bound to it."""
    storage_class = k8s_objects.register(f"{name}-sc", storage_class_manifest(kind),
                                         child_options(parent, opts, depends_on=depends_on))
    pv = k8s_objects.register(f"{name}-pv", volume, child_options(parent, opts, depends_on=[*depends_on, storage_class]),
                              kind="PersistentVolume")
    return k8s_objects.register(f"{name}-pvc", persistent_volume_claim_manifest(kind, env, capacity_gib),
                                child_options(parent, opts, depends_on=[pv]))
