"""Security contexts for eksbench's pods, built in one place (pure, no Pulumi).

The profile is Kubernetes' Pod Security Standard "restricted" (Kubernetes docs, "Pod
Security Standards"): ``runAsNonRoot``, ``allowPrivilegeEscalation: false``, every
capability dropped (only ``NET_BIND_SERVICE`` may be added back), a ``RuntimeDefault``
or ``Localhost`` seccomp profile; plus ``readOnlyRootFilesystem`` where the image allows.

What a read-only root and a non-root user break, and how ``harden_pod_spec`` answers it:

- The stock images (``pytorch/pytorch:*``, ``python:*-slim``) run as root and have no user
  for our UID in /etc/passwd; the kubelet then sets ``HOME=/``, which is not writable.
  ``HOME`` is set to an emptyDir, so ``pip install`` (which falls back to
  ``--user`` when site-packages is not writable), torch/triton caches and
  ``~/.config`` land there; ``/tmp`` is an emptyDir too (TorchInductor's default cache).
  ``USER`` and ``LOGNAME`` are set because ``getpass.getuser()`` reads them before the
  passwd database, where a UID without an entry raises KeyError (TorchInductor names its
  cache dir after the user; torch 2.14 catches the error, older releases may not).
- ``pip install`` into the image's site-packages (root-owned) is what stops working: the
  launcher's ``ensure_modules`` and the staging ENTRYPOINT still work, through pip's
  user-site fallback into ``$HOME/.local`` (on ``sys.path`` of every later interpreter).
- ``/dev/shm`` stays the Memory emptyDir the builders already mount: emptyDirs are
  world-writable, so a non-root user writes there.
- The shared volume is NOT fixed by ``fsGroup``, and on FSx ``fsGroup`` is harmful. Whether the
  kubelet applies ``fsGroup`` to a CSI volume is the driver's ``fsGroupPolicy``. The EFS CSI
  driver's CSIDriver sets none (kubernetes-sigs/aws-efs-csi-driver
  charts/aws-efs-csi-driver/templates/csidriver.yaml), so the default ``ReadWriteOnceWithFSType``
  skips our RWX volume. The FSx CSI driver makes it a chart value
  (kubernetes-sigs/aws-fsx-csi-driver charts/aws-fsx-csi-driver/values.yaml
  ``csidriver.fsGroupPolicy``, ``ReadWriteOnceWithFSType`` on master in 2026). A change of that
  default to ``File`` was proposed (PR #348, on hold because the field was immutable), and an
  add-on's or a user's CSIDriver may set ``File``. Then the kubelet re-owns every file of the
  file system (an imported ImageNet: about 1.3 million) before the container starts, even with
  ``OnRootMismatch`` on a root-owned root, and FSx exports each change. So pods that mount the FSx
  claim get no ``fsGroup`` (``harden_pod_spec(fs_group=False)``). A new file system's root is
  ``root:root 0755``: pods write there through an EFS access point with a POSIX user (volumeHandle
  ``fs-...::fsap-...``), or in folders the ``volume-owner`` init container hands to each writer's
  UID (FSx).
- EFA: libfabric pins memory, which needs an unlimited ``RLIMIT_MEMLOCK`` or
  ``CAP_IPC_LOCK`` (libfabric prov/efa docs; awslabs/awsome-distributed-ai issue #647,
  "Cannot allocate memory" with a 64 KiB limit). Kubernetes has no rlimit field
  (kubernetes/kubernetes#3595, open). The EKS AL2023 node's containerd base runtime spec raises only
  RLIMIT_NOFILE (awslabs/amazon-eks-ami nodeadm/internal/containerd/base-runtime-spec.json),
  so a container's memlock limit is whatever containerd inherited, which no AWS source promises
  to be unlimited. A capability is inert for a non-root process (no ambient caps). So EFA pods
  use ``efa_container_security_context`` (root, ALL dropped, IPC_LOCK added), and the folders they
  write are owned by root (``writer_uid``). Root without CAP_DAC_OVERRIDE is an ordinary
  "other" on any other UID's folder (infra/access/file_access.py).
- GPUs only where asked for: every container that requests no ``nvidia.com/gpu`` gets
  ``NVIDIA_VISIBLE_DEVICES=void``. Images built on ``nvidia/cuda`` set it to ``all``, and
  the NVIDIA container runtime then exposes every GPU of the node to a container the device
  plugin gave none ("void or empty or unset: nvidia-container-runtime will have the same
  behavior as runc"; NVIDIA Container Toolkit docs, "Specialized Configurations with
  Docker", GPU Enumeration).
- GPUs need nothing: the NVIDIA container toolkit injects ``/dev/nvidia*`` readable and
  writable by any user; no pod needs ``privileged``.
"""

from __future__ import annotations

import copy
import shlex
from typing import Iterable, Mapping

# Any fixed UID works (the stock images have no passwd entry for it); one above 10000 cannot be
# a user of the node (AL2023's ec2-user is 1000), which is what checkov's CKV_K8S_40 asks.
# The shared file system's access point (or chown) must use the same UID.
RUN_AS_USER = 10001
USER_NAME = "eksbench"
HOME_DIR = "/home/eksbench"
SCRATCH_VOLUMES = (("home", HOME_DIR), ("tmp", "/tmp"))
SECCOMP_RUNTIME_DEFAULT = {"type": "RuntimeDefault"}
EFA_USER = 0  # efa_container_security_context: root, IPC_LOCK only
NO_GPUS_ENV = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
GPU_RESOURCE = "nvidia.com/gpu"


def writer_uid(*, efa: bool) -> int:
    """The UID a hardened pod's containers write as: root for EFA pods, RUN_AS_USER otherwise."""
    return EFA_USER if efa else RUN_AS_USER


def restricted_container_security_context(*, run_as_user: int | None = RUN_AS_USER, read_only_root: bool = True,
                                          add_capabilities: Iterable[str] = ()) -> dict:
    """A container securityContext at the "restricted" level.

    ``run_as_user=None`` leaves the UID to the pod (or the image) but still demands non-root.
    """
    ctx: dict = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                 "readOnlyRootFilesystem": read_only_root, "runAsNonRoot": True,
                 "seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT)}
    if run_as_user is not None:
        if run_as_user == 0:
            raise ValueError("run_as_user=0 is root; use efa_container_security_context for pods that need root")
        ctx["runAsUser"] = run_as_user
        ctx["runAsGroup"] = run_as_user
    added = sorted(set(add_capabilities))
    if added:
        ctx["capabilities"]["add"] = added
    return ctx


def efa_container_security_context(*, read_only_root: bool = True) -> dict:
    """For EFA training pods: root (no ambient capabilities for non-root), every capability
    dropped but IPC_LOCK (libfabric's memory registration), no escalation, RuntimeDefault seccomp."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
            "readOnlyRootFilesystem": read_only_root, "runAsNonRoot": False, "runAsUser": EFA_USER,
            "seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT)}


def pod_security_context(*, run_as_user: int | None = RUN_AS_USER, fs_group: int | None = RUN_AS_USER) -> dict:
    """The pod-level part: non-root UID/GID, fsGroup for emptyDir/ConfigMap volumes (changed only
    when the volume root does not match, so a large volume is never walked), RuntimeDefault seccomp."""
    ctx: dict = {"seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT)}
    if run_as_user is not None:
        ctx.update(runAsNonRoot=True, runAsUser=run_as_user, runAsGroup=run_as_user)
    if fs_group is not None:
        ctx.update(fsGroup=fs_group, fsGroupChangePolicy="OnRootMismatch")
    return ctx


def scratch_volumes() -> tuple[list[dict], list[dict], list[dict]]:
    """(volumes, volumeMounts, env) that give a read-only-root container a writable HOME and /tmp."""
    volumes = [{"name": f"eksbench-{name}", "emptyDir": {"sizeLimit": "2Gi"}} for name, _ in SCRATCH_VOLUMES]
    mounts = [{"name": f"eksbench-{name}", "mountPath": path} for name, path in SCRATCH_VOLUMES]
    env = [{"name": "HOME", "value": HOME_DIR}, {"name": "USER", "value": USER_NAME},
           {"name": "LOGNAME", "value": USER_NAME}]
    return volumes, mounts, env


def harden_pod_spec(spec: dict, *, efa: bool = False, read_only_root: bool = True,
                    run_as_user: int = RUN_AS_USER, automount_token: bool | None = None,
                    fs_group: bool = True) -> dict:
    """A copy of the pod ``spec`` with the restricted profile on the pod and every container,
    and writable HOME and /tmp emptyDirs (a non-root user has no writable HOME in the stock images).

    ``efa=True`` gives every container ``efa_container_security_context`` and the pod no UID.
    ``automount_token=False`` keeps the service-account token out of pods that never call the
    API server (EKS Pod Identity injects its own projected token; the gate needs its token).
    ``fs_group=False``: no ``fsGroup``, for pods that mount the FSx claim (the module docstring
    says why). Their emptyDirs are world-writable (0777) and ConfigMap files world-readable; a
    projected token gets the volume's ``defaultMode`` (0644 unless set) or, when every container
    runs as one UID, 0600 owned by that UID (kubernetes pkg/volume/projected/projected.go collectData).
    Every container without a GPU limit gets ``NVIDIA_VISIBLE_DEVICES=void``.
    Existing securityContext keys of the pod or a container win over the defaults (an explicit choice).
    """
    out = copy.deepcopy(spec)
    if automount_token is not None:
        out["automountServiceAccountToken"] = automount_token
    if efa:
        out["securityContext"] = {"seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT), **out.get("securityContext", {})}
    else:
        out["securityContext"] = {**pod_security_context(run_as_user=run_as_user,
                                                         fs_group=run_as_user if fs_group else None),
                                  **out.get("securityContext", {})}
    volumes, mounts, env = scratch_volumes()  # also without a read-only root: HOME must be writable
    taken = {v["name"] for v in out.get("volumes", [])}
    for c in out.get("initContainers", []) + out["containers"]:
        base = (efa_container_security_context(read_only_root=read_only_root) if efa else
                restricted_container_security_context(run_as_user=run_as_user, read_only_root=read_only_root))
        c["securityContext"] = {**base, **c.get("securityContext", {})}
        paths = {m["mountPath"] for m in c.get("volumeMounts", [])}
        c["volumeMounts"] = c.get("volumeMounts", []) + [m for m in mounts if m["mountPath"] not in paths]
        names = {e["name"] for e in c.get("env", [])}
        gpus = GPU_RESOURCE in (c.get("resources") or {}).get("limits", {})
        c["env"] = c.get("env", []) + [dict(e) for e in env + ([] if gpus else [NO_GPUS_ENV]) if e["name"] not in names]
        if not c["volumeMounts"]:
            del c["volumeMounts"]
        if not c["env"]:
            del c["env"]
    extra = [v for v in volumes if v["name"] not in taken]
    if extra:
        out["volumes"] = out.get("volumes", []) + extra
    return out


def volume_owner_init_container(*, image: str, volume: str, mount_path: str, paths: Iterable[str] = (),
                                run_as_user: int = RUN_AS_USER, owners: Mapping[str, int] | None = None) -> dict:
    """An init container that creates ``paths`` (under ``mount_path``) and hands them to
    ``run_as_user``, and each path of ``owners`` to its UID: for a shared volume without EFS
    access points (FSx for Lustre), whose directories are root-owned. Each folder belongs to
    the UID of the containers that write to it (``writer_uid``).

    It runs as root with only CAP_CHOWN and a read-only root filesystem. Every folder is created
    before any is handed over, so the pods of one experiment, running the same command in any
    order, never need to create a folder inside one root no longer owns (mkdir in a root-owned
    folder needs no capability for its owner, root; in another UID's folder it would need
    CAP_DAC_OVERRIDE, infra/access/file_access.py)."""
    wanted = {**{p: run_as_user for p in paths}, **dict(owners or {})}
    root = mount_path.rstrip("/")
    targets = {(p if p.startswith("/") else f"{root}/{p}"): uid for p, uid in wanted.items()}
    if not targets or any(not t.startswith(root + "/") for t in targets):
        raise ValueError(f"paths must lie below {mount_path}: {sorted(targets)}")
    by_uid: dict[int, list[str]] = {}
    for target, uid in targets.items():
        by_uid.setdefault(uid, []).append(target)
    chowns = " && ".join(f"chown {uid}:{uid} {' '.join(shlex.quote(t) for t in group)}"
                         for uid, group in by_uid.items())
    return {"name": "volume-owner", "image": image,
            "command": ["/bin/sh", "-c", f"mkdir -p {' '.join(shlex.quote(t) for t in targets)} && {chowns}"],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
                                "readOnlyRootFilesystem": True, "runAsNonRoot": False, "runAsUser": 0,
                                "seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT)},
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
            "volumeMounts": [{"name": volume, "mountPath": mount_path}]}
