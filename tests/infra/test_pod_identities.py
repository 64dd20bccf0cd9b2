"""Every pod of both shipped plans, checked by identity: may each container write every path it
writes, does any pod that mounts FSx carry an fsGroup, and does any container that asked for no
GPU see them (issue 16, faults 2, 10 and 12).

Write access is simulated, not assumed. The storage gives each folder its owner and mode: the
EFS access point maps every request to its POSIX user and roots the claim in a folder it creates
for that user; FSx is plain POSIX, root-owned, with the data repository folders made by FSx and
whatever the ``volume-owner`` init container creates and hands over (its ``mkdir``/``chown``
command is run here against the model, as root with its own capabilities); an emptyDir is
0777. Each container's identity (UID, GIDs, capabilities) comes from its securityContext
(infra.file_access.container_process), and each path it writes from its mounts and command:
every emptyDir and written hostPath, the launcher's ``--results-dir`` and staging's ``--dest``.
The pods of one experiment run in every order.
"""

from __future__ import annotations

import itertools
import posixpath
import shlex

import pytest

from bench.plan import evaluate, evaluate_config
from infra.file_access import Owner, Process, container_process, may_write
from tests.infra.plan_manifests import kubernetes_objects
from tests.infra.test_program import P5_FILLED

CLAIM_DRIVERS = {"efs.csi.aws.com": "efs", "fsx.csi.aws.com": "fsx"}
EMPTY_DIR = 0o777  # kubelet creates every emptyDir 0777 (kubernetes pkg/volume/emptydir/empty_dir.go)
NEW_DIR = 0o755  # mkdir under the default umask 022
HOST_PATHS_WRITTEN = {"/var/lib/kubelet/device-plugins"}  # the device plugins' sockets; /dev/infiniband is read
# Containers that write nothing on the shared claim, each with why (a new container must be added here
# or to shared_writes, so a new writer is never skipped).
NO_SHARED_WRITES = {"gate": "no shared mount", "etcd": "emptyDir only",
                    "nvidia-device-plugin-ctr": "hostPath only", "aws-efa-k8s-device-plugin": "hostPath only"}


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


class Storage:
    """A tiny file system of folders with owners, and how the shared claim treats identities."""

    def __init__(self, plan, *, mount_path: str):
        pv = next(m for _, m in kubernetes_objects(plan.resources) if m["kind"] == "PersistentVolume")
        self.kind = CLAIM_DRIVERS[pv["spec"]["csi"]["driver"]]
        self.mount = mount_path
        self.squash: Process | None = None
        res = {r["type"]: r["inputs"] for r in plan.resources}
        if self.kind == "efs":
            assert "::" in pv["spec"]["csi"]["volumeHandle"], "EFS without an access point"
            ap = res["aws:efs/accessPoint:AccessPoint"]
            user, info = ap["posixUser"], ap["rootDirectory"]["creationInfo"]
            # The access point replaces every client identity with its POSIX user (AWS EFS docs,
            # "Enforcing a user identity using an access point"); the root it creates has creationInfo.
            self.squash = Process(uid=int(user["uid"]), gids=frozenset({int(user["gid"])}), caps=frozenset())
            self.dirs = {mount_path: Owner(int(info["ownerUid"]), int(info["ownerGid"]), int(info["permissions"], 8))}
        else:
            # A new FSx for Lustre file system's root is root:root 0755; FSx creates each data repository
            # association's file system path (root-owned) before any client mounts.
            self.dirs = {mount_path: Owner(0, 0, 0o755)}
            dras = [r["inputs"] for r in plan.resources if r["type"].endswith("DataRepositoryAssociation")]
            for d in dras:
                self.dirs[mount_path + d["fileSystemPath"]] = Owner(0, 0, 0o755)

    def identity(self, process: Process) -> Process:
        return self.squash or process

    def mkdir_p(self, path: str, process: Process) -> None:
        process = self.identity(process)
        missing = []
        while path not in self.dirs:
            missing.append(path)
            path = posixpath.dirname(path)
            assert path.startswith(self.mount), f"{path} is not on the claim"
        for p in reversed(missing):
            parent = self.dirs[posixpath.dirname(p)]
            if not may_write(parent, process):
                raise PermissionError(f"mkdir {p}: {process} may not write {posixpath.dirname(p)} {parent}")
            self.dirs[p] = Owner(process.uid, min(process.gids), NEW_DIR)

    def chown(self, path: str, uid: int, gid: int, process: Process) -> None:
        process = self.identity(process)
        if self.squash is None and "CHOWN" not in process.caps:
            raise PermissionError(f"chown {path}: {process} lacks CAP_CHOWN")
        self.dirs[path] = Owner(uid, gid, self.dirs[path].mode)


def run_volume_owner(storage: Storage, pod: dict, container: dict) -> None:
    """The init container's ``mkdir -p A B && chown U:G A && chown V:W B``, step by step."""
    process = container_process(pod, container)
    assert container["command"][:2] == ["/bin/sh", "-c"]
    for step in container["command"][2].split(" && "):
        argv = shlex.split(step)
        if argv[:2] == ["mkdir", "-p"]:
            for path in argv[2:]:
                storage.mkdir_p(path, process)
        elif argv[0] == "chown":
            uid, gid = (int(x) for x in argv[1].split(":"))
            for path in argv[2:]:
                storage.chown(path, uid, gid, process)
        else:
            raise AssertionError(f"volume-owner runs {step!r}: teach this test what it does")


def flag_values(container: dict, flag: str) -> list[str]:
    """The values given to ``flag`` in the container's command line or ``sh -c`` script and args."""
    cmd = container.get("command", [])
    words = shlex.split(cmd[2] if cmd[:2] == ["/bin/sh", "-c"] else shlex.join(cmd)) + container.get("args", [])
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w == flag]


def shared_writes(container: dict) -> list[str]:
    """The folders on the shared claim this container writes, from its command."""
    name = container["name"]
    if name == "main":  # workloads.train.launch and the programs it starts
        paths = flag_values(container, "--results-dir")
        assert paths, f"{name}: no --results-dir in its command"
        return sorted(set(paths))
    if name == "stage":  # datasets.stage: copy mode writes the dataset folder; fsx mode only reads
        return flag_values(container, "--dest") if flag_values(container, "--mode") == ["copy"] else []
    assert name in NO_SHARED_WRITES, f"container {name!r}: say what it writes on the shared claim"
    return []


def check_pod(storage: Storage, name: str, pod: dict) -> list[str]:
    """Runs the pod's init containers against ``storage``, then checks every write of every container."""
    problems, checked = [], 0
    claim = {v["name"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v}
    empty = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
    host = {v["name"]: v["hostPath"]["path"] for v in pod.get("volumes", []) if "hostPath" in v}
    for c in pod.get("initContainers", []) + pod["containers"]:
        process = container_process(pod, c)
        mounts = c.get("volumeMounts", [])
        try:
            if c["name"] == "volume-owner":
                run_volume_owner(storage, pod, c)
                continue
            for m in mounts:
                if m["name"] in empty:
                    gid = (pod.get("securityContext") or {}).get("fsGroup", 0)
                    assert may_write(Owner(0, gid, EMPTY_DIR), process), f"emptyDir {m['mountPath']}"
                elif host.get(m["name"]) in HOST_PATHS_WRITTEN and not m.get("readOnly"):
                    if not may_write(Owner(0, 0, 0o755), process):  # root-owned on the node
                        problems.append(f"{name}/{c['name']}: cannot write hostPath {m['mountPath']} as {process}")
            for path in shared_writes(c):
                on_claim = [m for m in mounts if m["name"] in claim and
                            (path + "/").startswith(m["mountPath"].rstrip("/") + "/") and not m.get("readOnly")]
                assert on_claim, f"{name}/{c['name']} writes {path} outside any writable mount (read-only root)"
                sub = on_claim[0].get("subPath")
                if sub:  # the kubelet creates a missing subPath as root with every capability
                    storage.mkdir_p(f"{storage.mount}/{sub}", Process(0, frozenset({0}), frozenset({"DAC_OVERRIDE"})))
                    path = f"{storage.mount}/{sub}" + path[len(on_claim[0]["mountPath"].rstrip("/")):]
                storage.mkdir_p(path, process)  # the launcher's own mkdir -p
                owner = storage.dirs[path]
                checked += 1
                if not may_write(owner, storage.identity(process)):
                    problems.append(f"{name}/{c['name']}: cannot write {path} {owner} as {storage.identity(process)}")
        except PermissionError as e:
            problems.append(f"{name}/{c['name']}: {e}")
    if not checked and any(shared_writes(c) for c in pod["containers"]):
        problems.append(f"{name}: writes on the claim, none checked")
    return problems


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
            storage = Storage(plan, mount_path="/data")
            for name, pod, _ in staging + list(order):
                problems += check_pod(storage, name, pod)
            runs += 1
    assert runs and not sorted(set(problems)), "\n".join(sorted(set(problems)))


def test_the_p5_plan_has_root_writers_on_fsx(plans):
    """The case of issue 16 is exercised: EFA pods write as root with IPC_LOCK only, on FSx."""
    storage = Storage(plans["p5-fsx"], mount_path="/data")
    assert storage.kind == "fsx" and storage.squash is None
    efa = [container_process(pod, c) for name, pod, _ in pods(plans["p5-fsx"]) for c in pod["containers"]
           if "vpc.amazonaws.com/efa" in (c.get("resources") or {}).get("limits", {})]
    assert efa and all(p.uid == 0 and p.caps == frozenset({"IPC_LOCK"}) for p in efa)


@pytest.mark.parametrize("stack", ["dev", "p5-fsx"])
def test_no_fs_group_on_pods_that_mount_fsx(plans, stack):
    """With FSx's CSIDriver at ``fsGroupPolicy: File`` the kubelet would re-own the whole file system."""
    plan = plans[stack]
    fsx = Storage(plan, mount_path="/data").kind == "fsx"
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
