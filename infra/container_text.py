"""A container's command, args and env values written so that the kubelet passes them on unchanged.

The kubelet rewrites those strings before a container starts: ``$(VAR)`` becomes the value of the
container's env variable VAR where one is declared, ``$$`` becomes ``$``, and any other ``$`` stays
(kubernetes/kubernetes third_party/forked/golang/expansion/expand.go ``Expand``). It does so for the
command and args (pkg/kubelet/container/helpers.go ``ExpandContainerCommandAndArgs``), for each env
``value`` (pkg/kubelet/kubelet_pods.go ``makeEnvironmentVariables``) and for an exec probe's command
(pkg/kubelet/prober/prober.go, ``ExpandContainerCommandOnlyStatic``); not for lifecycle hooks
(pkg/kubelet/lifecycle/handlers.go runs ``handler.Exec.Command`` as it is). So a stack file's
``--tag=$(EKSBENCH_EXPERIMENT)`` would reach the trainer as the experiment's name and ``--cost=$$5``
as ``--cost=$5``.

The builders write what the process is to receive; ``kubelet_literal`` doubles every ``$`` of those
fields, once, where every manifest is registered (``infra.k8s_objects.register``), so no builder can
forget it and the escaped text is never escaped twice. Doubling is exact: ``Expand`` reads each ``$$``
as one ``$`` whatever follows it, so the container receives the builder's text byte for byte. No
eksbench container relies on ``$(VAR)``: a script that needs a variable reads it in its own shell
(``${JOB_COMPLETION_INDEX}``), which reaches the shell unchanged. A manifest's API form, ``bench plan
--json`` included, therefore shows ``$$`` where the process gets ``$``.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def escape_dollars(text: str) -> str:
    """``text`` as the kubelet's expansion gives it back unchanged: every ``$`` written ``$$``."""
    return text.replace("$", "$$")


def literal_container(container: Mapping[str, Any]) -> dict:
    """``container`` with its command, args, env values and exec probes' commands escaped."""
    out = copy.deepcopy(dict(container))
    for key in ("command", "args"):
        if key in out:
            out[key] = [escape_dollars(s) for s in out[key]]
    for var in out.get("env", []):
        if "value" in var:
            var["value"] = escape_dollars(var["value"])
    for probe in PROBES:
        exec_ = (out.get(probe) or {}).get("exec")
        if exec_ and "command" in exec_:
            exec_["command"] = [escape_dollars(s) for s in exec_["command"]]
    return out


def pod_spec_path(kind: str | None) -> tuple[str, ...] | None:
    """Where an object of ``kind`` holds a pod spec: ``spec`` of a Pod, ``spec.jobTemplate.spec.template.spec`` of
    a CronJob, ``spec.template.spec`` of a Job, Deployment, DaemonSet, StatefulSet or ReplicaSet; None without one."""
    if kind == "Pod":
        return ("spec",)
    if kind == "CronJob":
        return ("spec", "jobTemplate", "spec", "template", "spec")
    if kind in ("Job", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet"):
        return ("spec", "template", "spec")
    return None


def kubelet_literal(manifest: Mapping[str, Any], kind: str | None = None) -> Mapping[str, Any]:
    """``manifest`` with every container and init container of its pod spec escaped (``literal_container``);
    a manifest without a pod spec is returned as it is. ``kind``: where the manifest does not say it.
    ``manifest`` itself is not changed."""
    path = pod_spec_path(manifest.get("kind", kind))
    if path is None:
        return manifest
    out = dict(manifest)
    parent = out
    for key in path[:-1]:  # copy the dicts on the way down, share the rest
        parent[key] = dict(parent[key])
        parent = parent[key]
    spec = parent[path[-1]] = dict(parent[path[-1]])
    for key in ("initContainers", "containers"):
        if key in spec:
            spec[key] = [literal_container(c) for c in spec[key]]
    return out
