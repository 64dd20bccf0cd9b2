"""Autostop, part 2 of 4, the manifests (pure): the controller's Kubernetes objects, as plain dicts.

``workloads/autostop_component.py`` registers them.

One pod on the system nodes runs ``python3 -m workloads.train.control.autostop`` from the code ConfigMap
(the trainer's code, so no image of our own) in the pinned staging image, which gets boto3 the
way dataset staging gets it (``datasets.staging_manifests.ENTRYPOINT``). What it may do:

- Kubernetes: get, list and watch Jobs in the namespace and get the owner ConfigMap (a Role, not a
  ClusterRole); no Pods. One write, only on a stack with an autoscaled GPU group: patch Jobs in the
  namespace, to suspend the run's unfinished ones (autostop leaves those groups' sizes to Cluster Autoscaler).
- Network: nothing in; out only DNS (kube-dns), HTTPS (the API server, the regional EKS and
  S3 endpoints and PyPI for boto3: public addresses AWS does not fix, and a NetworkPolicy
  names no host names, so "any address on 443"), and the EKS Pod Identity agent on
  169.254.170.23 (EKS user guide, "Set up the Amazon EKS Pod Identity Agent": it listens on that
  link-local address), port 80: the SDK reads it from ``AWS_CONTAINER_CREDENTIALS_FULL_URI``,
  ``http://169.254.170.23/v1/credentials``, which EKS injects (plain HTTP, no port given).
- AWS: its Pod Identity role (``infra.access.policies.autostop_policy``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Mapping, Sequence

from core.catalog.pins import PIP_PINS, STAGING_IMAGE
from core.contract.names import AUTOSTOP_OWNER_CONFIG_MAP, ENV_AUTOSTOP
from infra.access.pod_security import harden_pod_spec
from infra.environment import SYSTEM_NODE_LABEL
from infra.labels import labels, metadata
from workloads.code_manifests import code_mount, code_volume
from workloads.launch.common import CODE_ROOT

NAME = "eksbench-autostop"
MODULE = "workloads.train.control.autostop"
HEARTBEAT = "/tmp/autostop-alive"  # touched after every look; the liveness probe reads its age
POD_IDENTITY_AGENT = "169.254.170.23/32"
ENTRYPOINT = (f'python -c "import boto3" 2>/dev/null || pip install --no-cache-dir --quiet --root-user-action=ignore '
              f'{PIP_PINS["boto3"]} && exec python -m {MODULE}')
SELECTOR = {"app.kubernetes.io/name": NAME}


def autostop_spec(*, namespace: str, run_id: str, cluster: str, node_groups: Sequence[str], region: str,
                  bucket: str, key: str, deadline_minutes: int, idle_minutes: int, generation: str,
                  sizes: Sequence[Mapping[str, int]] = (), suspend_at_deadline: bool = False) -> str:
    """The controller's instructions (``EKSBENCH_AUTOSTOP``), as workloads.train.control.autostop reads them.
    ``suspend_at_deadline``: some GPU group is Cluster Autoscaler's, so stopping suspends the unfinished Jobs."""
    return json.dumps({"namespace": namespace, "run_id": run_id, "cluster": cluster, "node_groups": list(node_groups),
                       "region": region, "bucket": bucket, "key": key, "deadline_minutes": deadline_minutes,
                       "idle_minutes": idle_minutes, "heartbeat": HEARTBEAT, "generation": generation,
                       "owner": AUTOSTOP_OWNER_CONFIG_MAP, "sizes": [dict(s) for s in sizes],
                       "suspend_at_deadline": suspend_at_deadline}, sort_keys=True)


def autostop_generation(*, run_id: str, experiments: Sequence[Any], code_config_map: str, deadline_minutes: int,
                        idle_minutes: int) -> str:
    """What this `pulumi up` asks of the GPU groups, as 16 hex digits: the run, its experiments, the code the
    Jobs run and the autostop settings. A re-run that creates new Jobs (a new run_id, a code or experiment
    change) is a new generation; a `pulumi up` that changes none of them is the same one."""
    doc = {"run_id": run_id, "experiments": [dataclasses.asdict(e) for e in experiments], "code": code_config_map,
           "deadline_minutes": deadline_minutes, "idle_minutes": idle_minutes}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def owner_config_map_manifest(*, namespace: str, generation: str, run_id: str) -> dict:
    """The generation that may scale the GPU groups (``AUTOSTOP_OWNER_CONFIG_MAP``). The GPU node groups
    depend on it, so a `pulumi up` records its generation before it restores their sizes: an older
    controller still running reads it and stands down (workloads.train.control.autostop.superseded)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(AUTOSTOP_OWNER_CONFIG_MAP, namespace, label_set=labels(NAME, component="autostop")),
            "data": {"generation": generation, "run_id": run_id}}


def controller_metadata(namespace: str) -> dict:
    return metadata(NAME, namespace, label_set=labels(NAME, component="autostop"))


def autostop_rbac_manifests(namespace: str, *, suspend_jobs: bool = False) -> list[dict]:
    """ServiceAccount, Role (get/list/watch Jobs in the namespace, get the owner ConfigMap; patch Jobs too
    when ``suspend_jobs``, for a stack with an autoscaled GPU group) and RoleBinding."""
    job_verbs = ["get", "list", "watch", "patch"] if suspend_jobs else ["get", "list", "watch"]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": controller_metadata(namespace)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": controller_metadata(namespace),
         "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": job_verbs},
                   {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [AUTOSTOP_OWNER_CONFIG_MAP],
                    "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": controller_metadata(namespace),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
    ]


def autostop_network_policy_manifest(namespace: str) -> dict:
    """Nothing in; DNS, HTTPS and the Pod Identity agent out (the module docstring says why)."""
    dns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
           "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": controller_metadata(namespace),
            "spec": {"podSelector": {"matchLabels": dict(SELECTOR)}, "policyTypes": ["Ingress", "Egress"],
                     "ingress": [],
                     "egress": [{"to": [dns],
                                 "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}],
                                 "ports": [{"protocol": "TCP", "port": 443}]},
                                {"to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT}}],
                                 "ports": [{"protocol": "TCP", "port": 80}]}]}}


def autostop_deployment_manifest(*, namespace: str, spec: str, code_config_map: dict) -> dict:
    """One replica (Recreate: never two controllers) on the system nodes, hardened like every pod; it
    keeps its service-account token (it lists Jobs through the API server)."""
    alive = ["python3", "-c", f"import os,sys,time; sys.exit(time.time() - os.path.getmtime('{HEARTBEAT}') > 300)"]
    container = {"name": "autostop", "image": STAGING_IMAGE, "command": ["sh", "-c", ENTRYPOINT],
                 "env": [{"name": ENV_AUTOSTOP, "value": spec},
                         {"name": "PYTHONPATH", "value": CODE_ROOT}],
                 "volumeMounts": [code_mount()],
                 # The installer runs first: give it two minutes before the heartbeat counts.
                 "livenessProbe": {"exec": {"command": alive}, "initialDelaySeconds": 120, "periodSeconds": 60},
                 "readinessProbe": {"exec": {"command": alive}, "initialDelaySeconds": 30, "periodSeconds": 30},
                 "resources": {"requests": {"cpu": "10m", "memory": "128Mi"},
                               "limits": {"cpu": "200m", "memory": "256Mi"}}}
    pod = harden_pod_spec({"serviceAccountName": NAME, "nodeSelector": dict(SYSTEM_NODE_LABEL),
                           "enableServiceLinks": False, "containers": [container],
                           "volumes": [code_volume(code_config_map)]})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": controller_metadata(namespace),
            "spec": {"replicas": 1, "selector": {"matchLabels": dict(SELECTOR)}, "strategy": {"type": "Recreate"},
                     "template": {"metadata": {"labels": labels(NAME, component="autostop")}, "spec": pod}}}
