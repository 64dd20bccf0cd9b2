"""Write access of a pod's containers, simulated against a model of the shared storage.

The storage gives each folder its owner and mode: the EFS access point maps every request to its
POSIX user and roots the claim in a folder it creates for that user; FSx is plain POSIX,
root-owned, with the data repository folders made by FSx and whatever the ``volume-owner`` init
container creates and hands over (its ``mkdir``/``chown`` command is run against the model, as
root with its own capabilities); an emptyDir is 0777. Each container's identity (UID, GIDs,
capabilities) comes from its securityContext (infra.access.file_access.container_process), and each
path it writes from its mounts and command: every emptyDir and written hostPath, the launcher's
``--results-dir`` and staging's ``--dest``.
"""

from __future__ import annotations

import posixpath
import shlex

from infra.access.file_access import Owner, Process, container_process, may_write
from tests.support.plan_manifests import kubernetes_objects

CLAIM_DRIVERS = {"efs.csi.aws.com": "efs", "fsx.csi.aws.com": "fsx"}
EMPTY_DIR = 0o777  # kubelet creates every emptyDir 0777 (kubernetes pkg/volume/emptydir/empty_dir.go)
NEW_DIR = 0o755  # mkdir under the default umask 022
HOST_PATHS_WRITTEN = {"/var/lib/kubelet/device-plugins"}  # the device plugins' sockets; /dev/infiniband is read
# Containers that write nothing on the shared claim, each with why (a new container must be added here
# or to shared_writes, so a new writer is never skipped).
NO_SHARED_WRITES = {"gate": "no shared mount", "autostop": "no shared mount", "etcd": "emptyDir only",
                    "nvidia-device-plugin-ctr": "hostPath only", "aws-efa-k8s-device-plugin": "hostPath only"}


class Storage:
    """A tiny file system of folders with owners, and how the shared claim treats identities."""

    def __init__(self, kind: str, *, mount_path: str, dirs: dict[str, Owner], squash: Process | None = None):
        self.kind, self.mount, self.dirs, self.squash = kind, mount_path, dict(dirs), squash

    @classmethod
    def fsx(cls, *, mount_path: str, repository_paths=("/datasets", "/results")) -> "Storage":
        """A new FSx for Lustre file system: root:root 0755, and each data repository association's
        file system path, which FSx creates (root-owned) before any client mounts."""
        dirs = {mount_path: Owner(0, 0, 0o755)}
        dirs.update({mount_path + p: Owner(0, 0, 0o755) for p in repository_paths})
        return cls("fsx", mount_path=mount_path, dirs=dirs)

    @classmethod
    def from_plan(cls, plan, *, mount_path: str) -> "Storage":
        """The stack's shared storage, from the plan's PersistentVolume and AWS resources."""
        pv = next(m for _, m in kubernetes_objects(plan.resources) if m["kind"] == "PersistentVolume")
        kind = CLAIM_DRIVERS[pv["spec"]["csi"]["driver"]]
        res = {r["type"]: r["inputs"] for r in plan.resources}
        if kind == "fsx":
            return cls.fsx(mount_path=mount_path, repository_paths=[r["inputs"]["fileSystemPath"] for r in plan.resources
                                                                   if r["type"].endswith("DataRepositoryAssociation")])
        assert "::" in pv["spec"]["csi"]["volumeHandle"], "EFS without an access point"
        ap = res["aws:efs/accessPoint:AccessPoint"]
        user, info = ap["posixUser"], ap["rootDirectory"]["creationInfo"]
        # The access point replaces every client identity with its POSIX user (AWS EFS docs,
        # "Enforcing a user identity using an access point"); the root it creates has creationInfo.
        squash = Process(uid=int(user["uid"]), gids=frozenset({int(user["gid"])}), caps=frozenset())
        root = Owner(int(info["ownerUid"]), int(info["ownerGid"]), int(info["permissions"], 8))
        return cls("efs", mount_path=mount_path, dirs={mount_path: root}, squash=squash)

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
    if name == "main":  # workloads.train.harness.launch and the programs it starts
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


