"""The Kubernetes side of shared storage, the same for EFS and FSx: a static PV and its claim.

No StorageClass: a class advertises dynamic provisioning, which the EFS and FSx CSI controllers
could only do with IAM permissions to create access points or whole file systems. Static volumes
need none (the node mounts with the file system id), so the drivers get no IAM and the PV and the
claim bind by name with ``storageClassName: ""`` (Kubernetes docs, "Persistent Volumes": a claim
with ``storageClassName: ""`` binds only to a PV without a class).

Both storage components register their file system's volume through ``register_shared_volume``;
the manifests come from ``infra.cluster.manifests``.
"""

from __future__ import annotations

from typing import Any, Sequence

import pulumi

from infra import k8s_objects
from infra.cluster.manifests import persistent_volume_claim_manifest
from infra.component_options import child_options
from infra.environment import Environment


def register_shared_volume(parent: pulumi.ComponentResource, opts: pulumi.ResourceOptions | None, name: str, *,
                           kind: str, volume: pulumi.Output, env: Environment, capacity_gib: int = 1200,
                           depends_on: Sequence[Any] = ()) -> pulumi.CustomResource:
    """The PersistentVolume ``volume`` (an Output of its manifest), then the claim bound to it."""
    pv = k8s_objects.register(f"{name}-pv", volume, child_options(parent, opts, depends_on=list(depends_on)),
                              kind="PersistentVolume")
    return k8s_objects.register(f"{name}-pvc", persistent_volume_claim_manifest(kind, env, capacity_gib),
                                child_options(parent, opts, depends_on=[pv]))
