"""The pod of a training or evaluation Job, as a plain dict (pure): its container, resources (GPUs, EFA devices,
CPU and memory in proportion), volumes (shared storage, /dev/shm, the code, the compile caches), the env the
launcher and NCCL read, one experiment's pods on nodes of their own, and the restricted security context
(``infra.access.pod_security``). ``job_manifests`` wraps it in the Jobs.
"""

from __future__ import annotations

from core.catalog import aws as catalog
from core.catalog.fabric import NCCL_ENV_BY_FAMILY, efa_hugepages_mib
from core.config.gpu_defaults import forks_loader_workers
from core.config.model import Experiment, GpuNodeGroup
from core.contract import summary_fields as F
from core.contract.names import (
    ENV_EFA,
    ENV_EXPERIMENT,
    ENV_FABRIC,
    ENV_GIT_COMMIT,
    ENV_IMAGE,
    ENV_REGION,
    ENV_RUN_ID,
    PEERS_LABEL,
    ZONE_FIELD,
)
from infra.access.pod_security import harden_pod_spec, volume_owner_init_container
from infra.environment import GPU_NODE_LABEL_KEY, GPU_TOLERATION, Environment
from infra.labels import COMPONENT_LABEL
from workloads.code_manifests import code_mount, code_volume
from workloads.launch.common import CODE_ROOT, compiles
from workloads.results_folders import results_folder_owners
from workloads.train.harness.what_ran import JOB_ENV

GRACE_SECONDS = 120  # time for the launcher to write summary.json and upload after SIGTERM
# GPUDirect RDMA over EFA exists on p4d/p4de/p5/p5e only (AWS EFA docs).
EFA_RDMA_FAMILIES = ("p4d", "p4de", "p5", "p5e")
# torch.compile's on-disk caches: Inductor's under $TORCHINDUCTOR_CACHE_DIR, by default
# <tempdir>/torchinductor_<user>, with Triton's kernels in its triton/<device> subfolder unless
# TRITON_CACHE_DIR is set (torch/_inductor/runtime/cache_dir_utils.py cache_dir, triton_cache_dir;
# PyTorch tutorial "Compile Time Caching Configuration"). In the pods that is the 2 GiB /tmp
# emptyDir (infra/access/pod_security.py), and an emptyDir past its sizeLimit gets the whole pod evicted
# with a grace period of 0, so no summary either (kubelet eviction manager, "emptyDir usage
# exceeds the limit": kubernetes/kubernetes#45686, pkg/kubelet/eviction). Every rank autotunes into its own device's Triton
# folder, and Triton caches of autotuning runs reach gigabytes per process (pytorch/helion#1589:
# ~3 GB with quick and >15 GB with full autotuning effort). Compiled runs get a folder of their own.
COMPILE_CACHE_DIR = "/var/cache/eksbench-compile"
COMPILE_CACHE_GIB = 32

HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"  # a well-known node label: one value per node (Kubernetes docs)


def one_pod_per_node(job: str, *, pserver: bool) -> dict:
    """The required pod anti-affinity that keeps one experiment's pods on nodes of their own.

    Without it the scheduler may bin-pack pods that ask for part of a node onto one node, and a
    "2-node" run then talks over shared memory. Trainers repel every pod of the experiment
    (``PEERS_LABEL``: trainers and pservers); pservers repel trainers only, so they may share
    nodes with each other. The scheduler also honours an existing pod's required anti-affinity
    against an incoming pod (kubernetes/kubernetes pkg/scheduler/framework/plugins/interpodaffinity/
    filtering.go, satisfyExistingPodsAntiAffinity), so a pserver never lands beside a trainer
    either way round. Kubernetes API: PodAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.
    """
    match = {PEERS_LABEL: job, COMPONENT_LABEL: "training"} if pserver else {PEERS_LABEL: job}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": match}, "topologyKey": HOSTNAME_TOPOLOGY}]}}


def _shm_gib(group: GpuNodeGroup, gpus: int) -> int:
    """Half of the pod's share of the instance memory: DataLoader workers pass batches through /dev/shm."""
    spec = catalog.INSTANCE_TYPES[group.instance_type]
    return max(1, spec.memory_gib * gpus // max(spec.gpus, 1) // 2)


def _requests(group: GpuNodeGroup, gpus: int) -> dict[str, str]:
    """CPU and memory in proportion to the GPUs, at 75% to leave room for kubelet and DaemonSets."""
    spec = catalog.INSTANCE_TYPES[group.instance_type]
    share = max(gpus, 1) / max(spec.gpus, 1)
    return {"cpu": str(max(1, int(spec.vcpus * share * 0.75))),
            "memory": f"{max(1, int(spec.memory_gib * share * 0.75))}Gi"}


def _efa(group: GpuNodeGroup, gpus: int, *, forks: bool = False) -> tuple[dict[str, str], list[dict]]:
    """EFA device requests and the libfabric/NCCL env for them; nothing when the group has no EFA. ``forks``: the
    trainer forks loader workers after NCCL starts, so libfabric keeps off huge pages (gpu_defaults.EFA_FORK_NOTE)."""
    if not group.efa:
        return {}, []
    spec = catalog.INSTANCE_TYPES[group.instance_type]
    # The pod's share of the node's interfaces, from the count the launch template creates (one source).
    count = max(1, catalog.efa_interfaces(group.instance_type) * gpus // max(spec.gpus, 1))
    env = [{"name": "FI_PROVIDER", "value": "efa"}, {"name": "FI_EFA_FORK_SAFE", "value": "1"},
           {"name": ENV_EFA, "value": "1"}]  # the launcher judges NCCL's transport by it (core.catalog.fabric)
    family = group.instance_type.split(".")[0]
    if family in EFA_RDMA_FAMILIES:
        env.append({"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"})
    # AWS's EFA recipe (core.catalog.fabric.EFA_RECIPE): huge pages for libfabric, NCCL's buffer sizes on p5.
    env += [{"name": k, "value": v} for k, v in sorted(NCCL_ENV_BY_FAMILY.get(family, {}).items())]
    if forks:
        env.append({"name": "FI_EFA_USE_HUGE_PAGE", "value": "0"})
    return {"vpc.amazonaws.com/efa": str(count),
            "hugepages-2Mi": f"{efa_hugepages_mib(gpus, spec.gpus)}Mi"}, env


def what_ran_env(group: GpuNodeGroup) -> dict[str, str]:
    """The summary's ``what_ran`` facts the stack's config knows about the node (workloads.train.harness.what_ran):
    instance type, node group, AMI type, capacity type, placement group, and the zone where pinned."""
    out = {F.INSTANCE_TYPE: group.instance_type, F.NODE_GROUP: group.name, F.AMI_TYPE: group.ami_type,
           F.CAPACITY_TYPE: group.capacity_type, F.PLACEMENT_GROUP: "cluster" if group.placement_group else "none"}
    if group.availability_zone:
        out[F.ZONE] = group.availability_zone
    return out


def pod_ip_env(name: str) -> dict:
    """The pod's IP through the downward API (status.podIP)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def base_env(e: Experiment, *, group: GpuNodeGroup, run_id: str, region: str | None,
             git_commit: str | None) -> list[dict]:
    """The env every training and evaluation container gets: what ran (image, run, experiment, the node's facts
    for the summary's ``what_ran``), the code's path, NCCL's INIT lines, the fabric rule, the commit and region."""
    out = [{"name": ENV_IMAGE, "value": e.image}, {"name": ENV_RUN_ID, "value": run_id},
           {"name": ENV_EXPERIMENT, "value": e.name}, {"name": "PYTHONPATH", "value": CODE_ROOT},
           {"name": "PYTHONUNBUFFERED", "value": "1"},
           # the transport NCCL picked (its INIT lines name NET/OFI or NET/Socket, and aws-ofi-nccl's
           # version; workloads.train.harness.collect.nccl_transport and what_ran read them from the logs)
           {"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"},
           {"name": ENV_FABRIC, "value": e.fabric}]
    known = what_ran_env(group)
    out += [{"name": JOB_ENV[k], "value": v} for k, v in known.items()]  # the summary's what_ran
    if F.ZONE not in known:  # a missing label reads as "" (what_ran then says why it is unknown)
        out.append({"name": JOB_ENV[F.ZONE], "valueFrom": {"fieldRef": {"fieldPath": ZONE_FIELD}}})
    if git_commit:
        out.append({"name": ENV_GIT_COMMIT, "value": git_commit})
    if region:
        out += [{"name": ENV_REGION, "value": region}, {"name": "AWS_DEFAULT_REGION", "value": region}]
    return out


def add_compile_cache(spec: dict) -> None:
    """Give a compiled run's container its own emptyDir for Inductor's and Triton's caches (COMPILE_CACHE_GIB)."""
    spec["volumes"].append({"name": "compile-cache", "emptyDir": {"sizeLimit": f"{COMPILE_CACHE_GIB}Gi"}})
    spec["containers"][0]["volumeMounts"].append({"name": "compile-cache", "mountPath": COMPILE_CACHE_DIR})
    spec["containers"][0]["env"].append({"name": "TORCHINDUCTOR_CACHE_DIR", "value": COMPILE_CACHE_DIR})


def pod_spec(e: Experiment, *, env: Environment, group: GpuNodeGroup, code_config_map: dict, script: str, run_id: str,
             extra_env: list[dict], gpus: int, subdomain: str | None, region: str | None, efa: bool,
             git_commit: str | None = None) -> dict:
    """The pod of a training (``gpus`` per pod, EFA where the group has it) or evaluation Job running ``script``."""
    efa_resources, efa_env = _efa(group, gpus, forks=forks_loader_workers(e)) if efa else ({}, [])
    device = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    requests = {**_requests(group, gpus), **device, **efa_resources}
    spec = {
        "restartPolicy": "Never",  # required by podFailurePolicy; retries are new pods (backoffLimit)
        "serviceAccountName": env.service_account,  # EKS Pod Identity: S3 access without keys
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "nodeSelector": {GPU_NODE_LABEL_KEY: group.name, "node.kubernetes.io/instance-type": group.instance_type,
                         **env.claim_node_selector},
        "tolerations": [dict(GPU_TOLERATION)],
        "containers": [{
            "name": "main", "image": e.image, "command": ["/bin/sh", "-c", script],
            "env": base_env(e, group=group, run_id=run_id, region=region, git_commit=git_commit) + extra_env + efa_env,
            "resources": {"requests": requests, "limits": {**device, **efa_resources}},
            "volumeMounts": [{"name": "shared", "mountPath": env.mount_path},
                             {"name": "dshm", "mountPath": "/dev/shm"},
                             code_mount()]}],
        "volumes": [
            {"name": "shared", "persistentVolumeClaim": {"claimName": env.claim_name}},
            # The container runtime's default /dev/shm is 64 MiB, too small for DataLoader workers and NCCL.
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{_shm_gib(group, max(gpus, 1))}Gi"}},
            code_volume(code_config_map)],
    }
    if compiles(e, group.instance_type):
        add_compile_cache(spec)
    if not spec["containers"][0]["resources"]["limits"]:
        del spec["containers"][0]["resources"]["limits"]
    if subdomain:
        spec["subdomain"] = subdomain
    fsx = env.storage_kind == "fsx"
    if fsx:
        # FSx for Lustre has no access points: hand each results folder to the UID that writes it.
        spec["initContainers"] = [volume_owner_init_container(
            image=e.image, volume="shared", mount_path=env.mount_path,
            owners=results_folder_owners(e, env=env, group=group))]
    # Non-root, no capabilities, RuntimeDefault seccomp, read-only root with writable HOME and /tmp;
    # EFA pods keep root with IPC_LOCK only (infra/access/pod_security.py says why). No API token: Pod Identity
    # brings its own. No fsGroup with FSx: the kubelet could re-own the whole file system.
    return harden_pod_spec(spec, efa=bool(efa_resources), automount_token=False, fs_group=not fsx)
