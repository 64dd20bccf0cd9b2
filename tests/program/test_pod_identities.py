"""Every pod of both shipped plans, checked by identity: may each container write every path it
writes, does any pod that mounts FSx carry an fsGroup, and does any container that asked for no
GPU see them (issue 16, faults 2, 10 and 12).

Write access is simulated, not assumed. The storage gives each folder its owner and mode: the
EFS access point maps every request to its POSIX user and roots the claim in a folder it creates
for that user; FSx is plain POSIX, root-owned, with the data repository folders made by FSx and
whatever the ``volume-owner`` init container creates and hands over (its ``mkdir``/``chown``
command is run here against the model, as root with its own capabilities); an emptyDir is
0777. Each container's identity (UID, GIDs, capabilities) comes from its securityContext
(infra.access.file_access.container_process), and each path it writes from its mounts and command:
every emptyDir and written hostPath, the launcher's ``--results-dir`` and staging's ``--dest``.
The pods of one experiment run in every order.
"""

from __future__ import annotations

import itertools

import pytest

from infra.access.file_access import container_process
from program.offline import evaluate, evaluate_config
from tests.program.test_program import P5_FILLED
from tests.support.plan_manifests import kubernetes_objects
from tests.support.pod_writes import Storage, check_pod


@pytest.fixture(scope="module")
def plans():
    return {"dev": evaluate("dev"), "p5-fsx": evaluate_config("p5-fsx", P5_FILLED)}


def pods(plan) -> list[tuple[str, dict, dict]]:
    """(resource name, pod spec, pod labels) of every workload object in the plan."""
    out = []
    for name, m in kubernetes_objects(plan.resources):
        template = (m.get("spec") or {}).get("template")
        if template:
            out.append((name, template["spec"], (template.get("metadata") or {}).get("labels", {})))
    return out


@pytest.mark.parametrize("stack", ["dev", "p5-fsx"])
def test_every_container_may_write_every_path_it_writes(plans, stack):
    plan = plans[stack]
    all_pods = pods(plan)
    staging = [p for p in all_pods if p[0].startswith("staging-")]
    by_experiment: dict[str, list] = {}
    for p in all_pods:
        if p not in staging:
            by_experiment.setdefault(p[2].get("eksbench.io/experiment", p[0]), []).append(p)
    problems, runs = [], 0
    for group in by_experiment.values():
        for order in itertools.permutations(group):  # the Jobs of an experiment start in any order
            storage = Storage.from_plan(plan, mount_path="/data")
            for name, pod, _ in staging + list(order):
                problems += check_pod(storage, name, pod)
            runs += 1
    assert runs and not sorted(set(problems)), "\n".join(sorted(set(problems)))


def test_the_p5_plan_has_root_writers_on_fsx(plans):
    """The case of issue 16 is exercised: EFA pods write as root with IPC_LOCK only, on FSx."""
    storage = Storage.from_plan(plans["p5-fsx"], mount_path="/data")
    assert storage.kind == "fsx" and storage.squash is None
    efa = [container_process(pod, c) for name, pod, _ in pods(plans["p5-fsx"]) for c in pod["containers"]
           if "vpc.amazonaws.com/efa" in (c.get("resources") or {}).get("limits", {})]
    assert efa and all(p.uid == 0 and p.caps == frozenset({"IPC_LOCK"}) for p in efa)


@pytest.mark.parametrize("stack", ["dev", "p5-fsx"])
def test_no_fs_group_on_pods_that_mount_fsx(plans, stack):
    """With FSx's CSIDriver at ``fsGroupPolicy: File`` the kubelet would re-own the whole file system."""
    plan = plans[stack]
    fsx = Storage.from_plan(plan, mount_path="/data").kind == "fsx"
    mounting = [(name, pod) for name, pod, _ in pods(plan)
                if any("persistentVolumeClaim" in v for v in pod.get("volumes", []))]
    assert mounting
    with_group = [name for name, pod in mounting if (pod.get("securityContext") or {}).get("fsGroup") is not None]
    assert not (fsx and with_group), with_group


# Containers that may see GPUs without asking, each with why.
GPU_ENV_EXEMPT = {
    "nvidia-device-plugin-ctr": "the NVIDIA device plugin enumerates every GPU of the node (NVML) to hand them out",
    "aws-efa-k8s-device-plugin": "upstream parity (tests/infra/test_manifests_parity.py); its image is not CUDA-based, "
                                 "so NVIDIA_VISIBLE_DEVICES is unset and the NVIDIA runtime exposes nothing",
}


@pytest.mark.parametrize("stack", ["dev", "p5-fsx"])
def test_containers_without_gpus_see_none(plans, stack):
    seen, seeing = 0, []
    for name, pod, _ in pods(plans[stack]):
        for c in pod.get("initContainers", []) + pod["containers"]:
            if "nvidia.com/gpu" in (c.get("resources") or {}).get("limits", {}) or c["name"] in GPU_ENV_EXEMPT:
                continue
            seen += 1
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if env.get("NVIDIA_VISIBLE_DEVICES") != "void":
                seeing.append(f"{name}/{c['name']}")
    assert seen and not seeing, seeing
