"""What ran: the software and the machine under a run, for the summary's ``what_ran`` object.

Two runs are only comparable when this is known, so each field says where it came from, and a
field nobody can know from inside the pod is null with the reason in ``what_ran_unknown``
(never a guess):

- from the Job (env set by ``workloads.job_manifests`` from the stack's config, ``JOB_ENV``):
  image, instance type, node group, AMI type, capacity type, placement group, the region (``AWS_REGION``,
  which prices the instance), and the zone
  when the group sits in one (``availability_zone``, or the zone ``program.stack`` chose for
  an EFA, placement-group, Capacity Block or multi-node group). Elsewhere the zone comes from the
  pod's own ``topology.kubernetes.io/zone`` label through the downward API, where the cluster copies
  it from the node at binding (PodTopologyLabelsAdmission, KEP-4742: alpha 1.33, beta 1.35;
  ``core.contract.names.ZONE_FIELD``); the downward API exposes no other node label
  (kubernetes/kubernetes#40610), and the launch template's hop limit 1
  (``infra.cluster.node_group.METADATA_OPTIONS``) keeps IMDS out of reach of pods.
- from the trainer (its ``run_info`` device record, ``workloads.train.common.device``): torch, CUDA,
  cuDNN, NCCL (``torch.cuda.nccl.version()``) and the NVIDIA driver (NVML, else nvidia-smi).
- from the container itself (the launcher): the kernel (``platform.release()``; a container
  shares its node's kernel), the EFA installer's version (first line of
  ``/opt/amazon/efa_installed_packages``, "# EFA installer version: 1.x.y", as the installer
  writes it and aws-samples' checks read it), and aws-ofi-nccl's version from NCCL's log line
  "NCCL INFO NET/OFI Using aws-ofi-nccl 1.x.y" (aws/aws-ofi-nccl ``nccl_ofi_net.c``:
  ``NCCL_OFI_INFO(NCCL_INIT | NCCL_NET, "Using " PACKAGE_STRING)``).

The image digest is known only when the image is pinned by digest (``...@sha256:``): a
container's ``imageID`` is in the pod's status, which the downward API does not expose. The
AMI release version is not in the stack's config (EKS picks the latest for the AMI type) nor
visible from a pod. Pure functions but ``read_efa_installer``; no torch here.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.contract import summary_fields as F
from core.contract.names import (
    ENV_AMI_TYPE,
    ENV_CAPACITY_TYPE,
    ENV_IMAGE,
    ENV_INSTANCE_TYPE,
    ENV_NODE_GROUP,
    ENV_PLACEMENT_GROUP,
    ENV_REGION,
    ENV_ZONE,
)

# The Job's env for each field it knows (one source: the Job builder and the launcher read these names).
JOB_ENV = {F.IMAGE: ENV_IMAGE, F.INSTANCE_TYPE: ENV_INSTANCE_TYPE, F.NODE_GROUP: ENV_NODE_GROUP,
           F.AMI_TYPE: ENV_AMI_TYPE, F.CAPACITY_TYPE: ENV_CAPACITY_TYPE,
           F.PLACEMENT_GROUP: ENV_PLACEMENT_GROUP, F.ZONE: ENV_ZONE, F.REGION: ENV_REGION}
DEVICE_FIELDS = (F.TORCH, F.CUDA, F.CUDNN, F.NCCL, F.DRIVER)  # keys of the trainer's device record
EFA_INSTALLED = Path("/opt/amazon/efa_installed_packages")
EFA_VERSION = re.compile(r"EFA installer version:\s*([0-9][\w.+-]*)")
OFI_VERSION = re.compile(r"NET/OFI Using aws-ofi-nccl ([0-9][\w.+-]*)")
LOCAL_IMAGE = "local (no container)"  # bench.local.experiment_run's EKSBENCH_IMAGE: a run on this machine

WHY = {
    F.IMAGE_DIGEST: "the image is pinned by tag; a pod cannot read its image's digest (the downward API "
                    "has no status.containerStatuses)",
    F.AMI_RELEASE: "EKS picks the AMI release; a pod cannot read it (no node labels in the downward API, "
                   "IMDS hop limit 1)",
    F.ZONE: "the node group spans zones (or sits in an existing VPC's subnet) and the cluster did not copy the "
            "node's topology.kubernetes.io/zone label onto the pod (PodTopologyLabelsAdmission, KEP-4742: beta and "
            "on by default upstream from Kubernetes 1.35; EKS does not publish its control plane's feature gates)",
    F.AWS_OFI_NCCL: "no 'NET/OFI Using aws-ofi-nccl' line in the node logs (no EFA, gloo, or NCCL_DEBUG unset)",
    F.EFA_INSTALLER: f"no {EFA_INSTALLED} in the image",
    F.DRIVER: "no NVIDIA driver (CPU run) or NVML and nvidia-smi both failed",
    "trainer": "the trainer did not report (it failed before its first step)",
    "local": "a local run on this machine: no container image, instance or node group",
    "cpu": "a CPU run: no GPU, so no NVIDIA driver and no NCCL (gloo)",
}


def image_digest(image: str | None) -> str | None:
    """``sha256:...`` of an image reference pinned by digest (``repo@sha256:...``), else None."""
    if image and "@" in image:
        digest = image.rsplit("@", 1)[1]
        return digest if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) else None
    return None


def ofi_version(log_texts: Sequence[str]) -> str | None:
    for text in log_texts:
        m = OFI_VERSION.search(text)
        if m:
            return m.group(1)
    return None


def efa_version(text: str | None) -> str | None:
    m = EFA_VERSION.search(text or "")
    return m.group(1) if m else None


def read_efa_installer(path: Path = EFA_INSTALLED) -> str | None:
    """The installer's record, its first 4 KiB (the version is on the first line), or None."""
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace")
    except OSError:
        return None


def what_ran(*, environ: Mapping[str, str], device: Mapping[str, Any] | None, nodes: int | None,
             log_texts: Sequence[str], efa_installed: str | None, kernel: str | None = None
             ) -> tuple[dict[str, Any], dict[str, str]]:
    """(``what_ran`` with every field of ``WHAT_RAN_FIELDS``, ``{field: why it is null}``)."""
    image = environ.get(JOB_ENV[F.IMAGE]) or None
    local = image == LOCAL_IMAGE
    out: dict[str, Any] = {k: None for k in F.WHAT_RAN_FIELDS}
    for key, var in JOB_ENV.items():
        out[key] = environ.get(var) or None
    out[F.IMAGE_DIGEST] = image_digest(image)
    for key in DEVICE_FIELDS:
        value = (device or {}).get(key)
        out[key] = str(value) if value is not None else None
    out[F.AWS_OFI_NCCL] = ofi_version(log_texts)
    out[F.EFA_INSTALLER] = efa_version(efa_installed)
    out[F.KERNEL] = kernel if kernel is not None else platform.release()
    out[F.NODES] = nodes
    why: dict[str, str] = {}
    for key, value in out.items():
        if value is not None:
            continue
        if local and (key in JOB_ENV or key in (F.AMI_RELEASE, F.IMAGE_DIGEST)):
            why[key] = WHY["local"]
        elif key in (F.NCCL, F.DRIVER) and (device or {}).get("name") == "cpu":
            why[key] = WHY["cpu"]
        elif key in WHY:
            why[key] = WHY[key]
        elif key in DEVICE_FIELDS and not device:
            why[key] = WHY["trainer"]
        elif key in JOB_ENV:
            why[key] = f"{JOB_ENV[key]} is not set in the pod"
        else:
            why[key] = "not reported"
    return out, why
