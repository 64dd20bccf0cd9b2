"""Registers a plain Kubernetes manifest dict as the matching typed pulumi-kubernetes resource.

The pure builders stay the single source of truth: this maps (apiVersion, kind) to the
resource class and passes the manifest's top-level fields through unchanged.
"""

from __future__ import annotations

import re

import pulumi
import pulumi_kubernetes as k8s

_KINDS = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "PersistentVolume"): k8s.core.v1.PersistentVolume,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("storage.k8s.io/v1", "StorageClass"): k8s.storage.v1.StorageClass,
}


def register(name: str, manifest: dict, opts: pulumi.ResourceOptions,
             outputs: pulumi.Output | None = None, build=None) -> pulumi.CustomResource:
    """Register ``manifest``; or, where it depends on Outputs, ``build(resolved)`` inside an apply.

    ``manifest`` is then a template built from placeholder values: it fixes the kind and the
    top-level fields, while each field's value comes from ``outputs.apply(build)``.
    """
    cls = _KINDS[(manifest["apiVersion"], manifest["kind"])]
    keys = [k for k in manifest if k not in ("apiVersion", "kind")]
    # Top-level fields are constructor arguments (snake_case); nested dicts pass through as-is.
    arg = {k: re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower() for k in keys}
    if outputs is None:
        return cls(name, **{arg[k]: manifest[k] for k in keys}, opts=opts)
    built = outputs.apply(build)
    return cls(name, **{arg[k]: built.apply(lambda m, k=k: m[k]) for k in keys}, opts=opts)
