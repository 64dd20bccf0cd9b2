"""Who may create files in a directory: a small model of Linux permission checks for pods. Pure.

Why it exists: a container that cannot write its results folder trains for nothing, and no
mock sees it. The pods' identities (UID, GIDs, capabilities) come from their manifests; the
folders' owners come from the storage (EFS access point, FSx plus the ``volume-owner`` init
container, emptyDir). ``may_write`` joins the two; the tests run it over every pod of a plan.

The rules (path_resolution(7), "Permission checking"; capabilities(7)):

- Creating an entry in a directory needs write and search (x) permission on it.
- ``CAP_DAC_OVERRIDE`` bypasses both. Root is not special by its UID, only by its capabilities:
  ``CAP_FOWNER`` does not help here (it bypasses checks that need the caller to own the file,
  such as chmod and utime, "excluding those operations covered by CAP_DAC_OVERRIDE").
- Otherwise the owner's bits apply when the process's UID is the owner, else the group's bits
  when the directory's group is one of the process's GIDs, else the others' bits.
- A container's capabilities: containerd's default set (below) minus ``drop`` plus ``add``
  for UID 0. A non-root process has none in effect, whatever ``add`` says: containerd sets
  no ambient capabilities, and execve by a non-root UID clears the permitted and effective
  sets of a binary without file capabilities (capabilities(7), "Transformation of
  capabilities during execve()"; ``allowPrivilegeEscalation: false`` sets no_new_privs, which
  ignores file capabilities too).
- A container's GIDs (Kubernetes docs, "Configure a Security Context for a Pod or
  Container"): ``runAsGroup`` (container, else pod; else the image's primary group, 0 for a
  UID without a passwd entry), plus the pod's ``supplementalGroups`` and ``fsGroup``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

# The capabilities containerd gives a container by default: the EKS AL2023 node's base runtime
# spec (awslabs/amazon-eks-ami nodeadm/internal/containerd/base-runtime-spec.json,
# process.capabilities.effective), the same list as containerd's pkg/oci defaultUnixCaps.
RUNTIME_DEFAULT_CAPS = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "NET_RAW",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
ALL_CAPS = "ALL"


@dataclass(frozen=True)
class Owner:
    """A directory's owner, group and mode (e.g. ``Owner(10001, 10001, 0o755)``)."""
    uid: int
    gid: int
    mode: int


@dataclass(frozen=True)
class Process:
    """A process's identity as the kernel checks it: UID, every GID (primary and supplementary),
    and its effective capabilities without the ``CAP_`` prefix (``{"IPC_LOCK"}``)."""
    uid: int
    gids: frozenset[int]
    caps: frozenset[str]


def _cap(name: str) -> str:
    return name.upper().removeprefix("CAP_")


def may_write(directory: Owner, process: Process) -> bool:
    """May ``process`` create a file or folder in ``directory``?"""
    if "DAC_OVERRIDE" in {_cap(c) for c in process.caps}:
        return True
    if process.uid == directory.uid:
        bits = directory.mode >> 6
    elif directory.gid in process.gids:
        bits = directory.mode >> 3
    else:
        bits = directory.mode
    return (bits & 0o3) == 0o3  # write and search


def effective_caps(uid: int, security_context: Mapping | None) -> frozenset[str]:
    """The effective capabilities of a container's process from its ``securityContext``."""
    ctx = security_context or {}
    if uid != 0:
        return frozenset()
    if ctx.get("privileged"):
        return frozenset({ALL_CAPS, *RUNTIME_DEFAULT_CAPS, "IPC_LOCK", "SYS_ADMIN"})
    caps = ctx.get("capabilities") or {}
    drop = {_cap(c) for c in caps.get("drop", [])}
    kept = set() if ALL_CAPS in drop else set(RUNTIME_DEFAULT_CAPS) - drop
    return frozenset(kept | {_cap(c) for c in caps.get("add", [])})


def container_process(pod_spec: Mapping, container: Mapping, *, image_uid: int = 0,
                      image_gids: Iterable[int] = ()) -> Process:
    """The identity of ``container``'s process in a pod with ``pod_spec``.

    ``image_uid``: the image's USER when neither the container nor the pod sets ``runAsUser``
    (root for the stock images this project runs). ``image_gids``: groups the image's
    /etc/group gives that user (Kubernetes' default supplementalGroupsPolicy ``Merge``).
    """
    pod = pod_spec.get("securityContext") or {}
    ctx = container.get("securityContext") or {}
    uid = ctx.get("runAsUser", pod.get("runAsUser", image_uid))
    gid = ctx.get("runAsGroup", pod.get("runAsGroup", 0))
    gids = {gid, *pod.get("supplementalGroups", []), *image_gids}
    if pod.get("fsGroup") is not None:
        gids.add(pod["fsGroup"])
    return Process(uid=int(uid), gids=frozenset(int(g) for g in gids), caps=effective_caps(int(uid), ctx))
