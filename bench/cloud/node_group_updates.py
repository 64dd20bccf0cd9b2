"""Before ``pulumi up`` on a stack that is up: would it roll a node group under Jobs that are still running?

A change to a node group's launch template (the stack's tags, ``storage.kind``, ``system_nodes.disk_size_gib``, a
GPU group's settings) or to its Kubernetes version starts an EKS managed node group update: EKS drains every node and
moves its pods to new ones (EKS user guide, "Managed node update behavior"). A training pod evicted so restarts
from step 0, and etcd, on the system nodes, moves after EKS's 15 minutes. So where the namespace has active Jobs
(neither finished nor suspended: ``core.config.autostop.running_jobs``), ``check`` asks ``pulumi preview`` what the
update does; when it updates a launch template or rolls a node group, the run's question (``bench.cloud.confirm``)
is asked again on that one line: ``--yes`` accepts the restart, anything else refuses. Nothing is previewed where
no Job is active (a new stack, a finished run), and a Kubernetes API that does not answer is a note, not a refusal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from bench.cloud import kube, pulumi_cli
from bench.cloud.stack_operations import last_line
from bench.errors import Refusal
from core.config.autostop import running_jobs

LAUNCH_TEMPLATE, NODE_GROUP = "aws:ec2/launchTemplate:LaunchTemplate", "aws:eks/nodeGroup:NodeGroup"
# Steps that replace a group's nodes: a replacement of the resource, or an update of what EKS rolls out
# (UpdateNodegroupVersion: launchTemplate, version, releaseVersion; pulumi-aws's camelCase property names).
REPLACING = frozenset({"replace", "create-replacement", "delete-replaced"})
ROLLING_DIFFS = frozenset({"launchTemplate", "version", "releaseVersion"})
SHOWN = 5


def rolled(events: Iterable[Any]) -> list[str]:
    """The launch templates and node groups a preview's engine events update or replace in a way that drains nodes,
    by their Pulumi names, in order; a node group update that only resizes or relabels is not one."""
    names: list[str] = []
    for event in events:
        step = getattr(getattr(event, "resource_pre_event", None), "metadata", None)
        if step is None:
            continue
        op = getattr(step.op, "value", step.op)
        if (step.type == LAUNCH_TEMPLATE and (op == "update" or op in REPLACING)) or (
                step.type == NODE_GROUP and (op in REPLACING or op == "update" and ROLLING_DIFFS & set(step.diffs or ()))):
            name = step.urn.rsplit("::", 1)[-1]
            names += [name] if name not in names else []
    return names


def _shown(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _active(outputs: dict[str, Any], ready: Any) -> tuple[list[str], str]:
    """The namespace's active Jobs, from the stack's ``outputs``, or [] and why none were read (no cluster yet, an
    API that does not answer)."""
    if not outputs.get("kubeconfig"):
        return [], "node groups: the stack has no cluster yet, nothing running on it"
    namespace = ready.cfg.namespace
    try:
        access = kube.access_from_kubeconfig(outputs["kubeconfig"], outputs.get("cluster_name") or "", ready.cfg.region)
        return running_jobs(kube.KubeClient(access).jobs(namespace)), f"node groups: no active Job in {namespace}"
    except Exception as e:  # noqa: BLE001 - a private endpoint, say: the update goes on unchecked
        return [], (f"node groups: the Jobs of {namespace} not checked, the Kubernetes API does not answer "
                    f"({type(e).__name__}); an update of a node group's launch template restarts its running pods")


def check(stack: str, root: Path, ready: Any, confirm: Callable[[list[str]], bool] | None) -> str:
    """preflight's line on the node groups; Refusal when ``pulumi up`` would roll a node group under active Jobs
    and ``confirm`` (the run's question, ``--yes`` answering it) does not accept it. ``confirm`` None: go on."""
    try:
        stk = pulumi_cli.open_stack(stack, root, check_config=False, create=False, overrides=ready.overrides)
        outputs = {k: v.value for k, v in stk.outputs().items()}
    except Exception:  # noqa: BLE001 - no such stack yet: nothing runs on it
        return "node groups: a new stack, nothing running on it"
    jobs, note = _active(outputs, ready)
    if not jobs:
        return note
    events: list[Any] = []
    try:
        stk.preview(on_event=events.append, refresh=True, suppress_progress=True)
    except Exception as e:  # noqa: BLE001 - CommandError: the up that follows says the same, in full
        return f"node groups: pulumi preview failed ({last_line(e)}); not checked"
    groups = rolled(events)
    if not groups:
        return f"node groups: pulumi up rolls none; {len(jobs)} active Job(s) in {ready.cfg.namespace} go on"
    line = (f"pulumi up -s {stack} would update {_shown(groups)}: EKS drains every node of those node groups, so "
            f"the pods of the {len(jobs)} active Job(s) in namespace {ready.cfg.namespace} ({_shown(jobs)}) are "
            "evicted and restart from step 0: wait for them to finish, or pass --yes to accept the restart")
    if confirm is None:
        return f"warning: {line}"
    if not confirm([line]):
        raise Refusal(line)
    return f"node groups: {len(jobs)} active Job(s) restart, as accepted"
