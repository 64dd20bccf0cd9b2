"""The one mock engine the tests use: ``program.mocks``, the engine ``bench plan`` runs.

``register`` runs a function that builds components (in the test body, after the mocks are
set) and returns the recording monitor, whose ``registrations`` hold every RegisterResource
request: type, name, parent, provider, dependencies, inputs and resource options.
"""

from __future__ import annotations

from typing import Any, Callable

from program.mock_run import run_program
from program.mocks import EksbenchMocks, RecordingMonitor, Registration

__all__ = ["EksbenchMocks", "RecordingMonitor", "Registration", "register", "of_type", "by_name", "k8s_manifest"]


def register(build: Callable[[], Any], *, stack: str = "dev", region: str = "us-west-2",
             mocks: EksbenchMocks | None = None) -> RecordingMonitor:
    """Run ``build()`` under the mock engine; every RPC is drained before this returns."""
    return run_program(build, project="eksbench", stack=stack, config={"aws:region": region},
                       mocks=mocks or EksbenchMocks(region=region))


def of_type(monitor: RecordingMonitor, typ: str) -> list[Registration]:
    return [r for r in monitor.registrations if r.type == typ]


def by_name(monitor: RecordingMonitor) -> dict[str, Registration]:
    return {r.name: r for r in monitor.registrations}


K8S_API = {"kubernetes:batch/v1:Job": ("batch/v1", "Job"), "kubernetes:core/v1:Service": ("v1", "Service"),
           "kubernetes:core/v1:ConfigMap": ("v1", "ConfigMap"),
           "kubernetes:core/v1:ServiceAccount": ("v1", "ServiceAccount"),
           "kubernetes:core/v1:Namespace": ("v1", "Namespace"),
           "kubernetes:rbac.authorization.k8s.io/v1:Role": ("rbac.authorization.k8s.io/v1", "Role"),
           "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("rbac.authorization.k8s.io/v1", "RoleBinding")}


def k8s_manifest(reg: Registration) -> dict:
    """A registered Kubernetes resource back as the manifest dict it was built from."""
    api, kind = K8S_API[reg.type]
    return {"apiVersion": api, "kind": kind,
            **{k: v for k, v in reg.inputs.items() if k not in ("apiVersion", "kind") and v is not None}}
