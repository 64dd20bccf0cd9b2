"""The gate, as plain dicts (pure): a CPU-only Job on the system nodes that waits for Jobs to finish and then
resumes suspended ones (``workloads/train/control/gate.py`` is its program), with the RBAC that lets it touch
those Jobs only. It orders a stack's experiments one after another and starts an evaluation after its training.
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

from core.catalog.pins import GATE_IMAGE
from core.config.model import Experiment
from core.contract.names import ENV_GATE
from infra.access.pod_security import harden_pod_spec
from infra.environment import SYSTEM_NODE_LABEL
from infra.labels import SKIP_AWAIT, labels, metadata
from workloads.code_manifests import code_mount, code_volume
from workloads.launch.common import CODE_ROOT
from workloads.object_names import base_name

GATE_MODULE = "workloads.train.control.gate"  # the gate Job's program; reads gate_spec() from EKSBENCH_GATE


def gate_spec(*, namespace: str, wait: list[tuple[str, str | None]], resume: list[str],
              require_success: list[str] = ()) -> str:
    """The gate's instructions as JSON (``EKSBENCH_GATE`` for workloads.train.control.gate).

    ``wait``: (job, alt) pairs; a job counts as done when it is Complete, Failed or gone, or when
    ``alt`` Failed (an evaluation that will never be started because its training failed).
    ``require_success``: waited jobs that must not have Failed for ``resume`` to happen.
    """
    return json.dumps({"namespace": namespace, "wait": [list(p) for p in wait], "resume": list(resume),
                       "require_success": list(require_success)}, sort_keys=True)


def gate_rbac_manifests(name: str, *, namespace: str, jobs: list[str]) -> list[dict]:
    """ServiceAccount, Role and RoleBinding that let a gate read and resume the named Jobs only."""
    meta = metadata(name, namespace, label_set=labels(component="gate"))
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(meta),
         # resourceNames works for get and patch (Kubernetes RBAC docs), so nothing else is reachable.
         "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": sorted(set(jobs)),
                    "verbs": ["get", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": dict(meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]


def gate_job_manifest(name: str, *, namespace: str, service_account: str, spec: str, deadline_seconds: int,
                      label_set: Mapping[str, str], fingerprint: str, code_config_map: dict) -> dict:
    """A CPU-only Job on the system nodes running ``python3 -m workloads.train.control.gate`` with ``spec``
    (``gate_spec``) in EKSBENCH_GATE, from the code ConfigMap mounted at CODE_ROOT.

    ``label_set``: experiment_labels(..., component="gate"). ``fingerprint`` (a hash of the Jobs it
    resumes) sits in the pod template, so replacing a gated Job replaces its gate too and the new
    Job does not stay suspended.
    """
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": metadata(name, namespace, label_set=label_set, annotations=SKIP_AWAIT),
            "spec": {"backoffLimit": 6, "activeDeadlineSeconds": deadline_seconds,
                     "template": {
                         "metadata": {"labels": dict(label_set),
                                      "annotations": {"eksbench.io/gated-jobs": fingerprint}},
                         # Restricted like every pod; the gate keeps its API token (it reads and resumes Jobs).
                         "spec": harden_pod_spec({
                             "restartPolicy": "OnFailure", "serviceAccountName": service_account,
                             "nodeSelector": dict(SYSTEM_NODE_LABEL), "enableServiceLinks": False,
                             "containers": [{"name": "gate", "image": GATE_IMAGE,
                                             "command": ["python3", "-m", GATE_MODULE],
                                             "env": [{"name": ENV_GATE, "value": spec},
                                                     {"name": "PYTHONPATH", "value": CODE_ROOT}],
                                             "volumeMounts": [code_mount()],
                                             "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                                                           "limits": {"cpu": "100m", "memory": "64Mi"}}}],
                             "volumes": [code_volume(code_config_map, only=GATE_MODULE)]})}}}


def fingerprint(*manifests: dict) -> str:
    """A short hash of manifests: the pod template that carries it (a gate's, an evaluation's) is replaced when
    they change."""
    return hashlib.sha256(json.dumps(manifests, sort_keys=True).encode()).hexdigest()[:16]


def completion_waits(e: Experiment, *, run_id: str) -> list[tuple[str, str | None]]:
    """What "experiment e is finished" means to a gate: its training Job, and its evaluation Job
    unless the training failed (then the evaluation is never started)."""
    job = base_name(e, run_id)
    return [(job, None), (f"{job}-eval", job)] if e.evaluate else [(job, None)]
