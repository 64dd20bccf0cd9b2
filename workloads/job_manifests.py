"""Kubernetes manifests for one experiment, as plain dicts: the single source of truth.

Pure builders (no Pulumi, no I/O): the training Indexed Job and its headless Service,
the paddle pserver Job, the evaluation Job, the ConfigMap that ships the training code,
and the "gate" Job plus its RBAC that orders Jobs (workloads/train/control/gate.py). The
Pulumi components register exactly these dicts; tests validate them against the pinned
Kubernetes schema.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Mapping

from core.catalog import aws as catalog
from core.catalog.fabric import FABRIC_EXIT_CODE, NCCL_ENV_BY_FAMILY, efa_hugepages_mib
from core.catalog.pins import GATE_IMAGE
from core.config.autostop import EVAL_TIMEOUT_MINUTES, experiment_budget_minutes
from core.config.gpu_defaults import forks_loader_workers
from core.config.model import Experiment, GpuNodeGroup
from core.contract import summary_fields as F
from core.contract.names import (
    ENV_EFA,
    ENV_EXPERIMENT,
    ENV_FABRIC,
    ENV_GATE,
    ENV_GIT_COMMIT,
    ENV_IMAGE,
    ENV_POD_IP,
    ENV_REGION,
    ENV_RUN_ID,
    EVAL_DIR,
    EXPERIMENT_LABEL,
    PEERS_LABEL,
    REPEAT_LABEL,
    RUN_ID_LABEL,
    SUMMARY_FILE,
    ZONE_FIELD,
)
from infra.access.pod_security import harden_pod_spec, volume_owner_init_container
from infra.environment import (
    GPU_NODE_LABEL_KEY,
    GPU_TOLERATION,
    SYSTEM_NODE_LABEL,
    Environment,
)
from infra.labels import COMPONENT_LABEL, SKIP_AWAIT, labels, metadata
from workloads import contracts
from workloads.results_folders import results_folder_owners
from workloads.train.harness.what_ran import JOB_ENV

CODE_CONFIG_MAP_LIMIT = 1024 * 1024  # a ConfigMap holds at most 1 MiB (Kubernetes ConfigMap docs)
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
# Evictions, preemption and node drains are not the workload's fault: they do not count against
# backoffLimit (Job podFailurePolicy; needs restartPolicy Never).
IGNORE_DISRUPTIONS = {"rules": [{"action": "Ignore",
                                  "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"  # a well-known node label: one value per node (Kubernetes docs)


# A node whose pods Cluster Autoscaler may not evict is never scaled down under them: a training or
# evaluation pod restarted elsewhere would lose its run (kubernetes/autoscaler cluster-autoscaler/FAQ.md,
# "What types of pods can prevent CA from removing a node?": cluster-autoscaler.kubernetes.io/safe-to-evict).
NOT_EVICTABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


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


def training_failure_policy() -> dict:
    """IGNORE_DISRUPTIONS, and fail the Job at once when the launcher says ``fabric: strict`` failed
    (core.catalog.fabric.FABRIC_EXIT_CODE): a retry would land on the same fabric; that training diverged
    (summary_fields.DIVERGED_EXIT_CODE): a retry would resume into the same divergence; or that the trainer recorded
    no step (summary_fields.NO_STEPS_EXIT_CODE): a retry would record none either. Kubernetes batch/v1
    PodFailurePolicyOnExitCodesRequirement: containerName, operator In|NotIn, values (exit codes, not 0)."""
    policy = copy.deepcopy(IGNORE_DISRUPTIONS)
    policy["rules"].append({"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                                                 "values": [FABRIC_EXIT_CODE, F.DIVERGED_EXIT_CODE,
                                                                            F.NO_STEPS_EXIT_CODE]}})
    return policy


def experiment_labels(e: Experiment, *, run_id: str, instance: str, component: str) -> dict[str, str]:
    repeat = {REPEAT_LABEL: str(e.repeat)} if e.repeat else {}  # one repeat's pods (repeats: N)
    return labels(component=component, instance=instance,
                  extra={EXPERIMENT_LABEL: e.name, RUN_ID_LABEL: run_id, **repeat})


def code_config_map_manifest(files: Mapping[str, str], *, namespace: str, prefix: str = "eksbench-code") -> dict:
    """An immutable ConfigMap of the shipped sources, named by their content hash.

    ``files`` maps paths relative to the repository root (``"core/contract/train_args.py"``,
    ``"workloads/train/harness/launch.py"``) to their text (code_files.read_code_files). A code
    change gives a new name, so the Jobs that mount it are replaced (rerun) instead of having
    their code swapped under running pods. Keys may not contain "/", so
    "/" is written as "--" (ConfigMap keys: [-._a-zA-Z0-9]+).
    """
    data = {}
    for path, text in sorted(files.items()):
        if "--" in path or path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"code file {path!r}: must be a relative path without '--' or '..'")
        data[path.replace("/", "--")] = text
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CODE_CONFIG_MAP_LIMIT:
        raise ValueError(f"training code is {size} bytes; a ConfigMap holds 1 MiB at most. "
                         "Bake the code into an image (workloads/Dockerfile) and set the experiments' image")
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
    return {"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
            "metadata": metadata(f"{prefix}-{digest}", namespace, label_set=labels(component="code")),
            "data": data}


def code_volume(code_config_map: dict) -> dict:
    """The code ConfigMap as a volume whose items put every key back at its path ("--" -> "/")."""
    items = [{"key": k, "path": k.replace("--", "/")} for k in sorted(code_config_map["data"])]
    return {"name": "code", "configMap": {"name": code_config_map["metadata"]["name"], "items": items}}


def code_mount() -> dict:
    """Where ``code_volume`` is mounted: ``contracts.CODE_ROOT``, the pods' PYTHONPATH."""
    return {"name": "code", "mountPath": contracts.CODE_ROOT, "readOnly": True}


def headless_service_manifest(e: Experiment, *, env: Environment, run_id: str) -> dict:
    """clusterIP None + the pods' subdomain = this name gives each pod the DNS name <job>-<i>.<svc>;
    publishNotReadyAddresses lets peers resolve each other before readiness (there is no probe)."""
    job, svc = contracts.base_name(e, run_id), contracts.service_name(e, run_id)
    launch = contracts.launch_for(e, env, job=job, service=svc, gpus=e.gpus_per_node)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": metadata(svc, env.namespace, annotations=SKIP_AWAIT,
                                 label_set=experiment_labels(e, run_id=run_id, instance=job, component="rendezvous")),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {PEERS_LABEL: job},
                     "ports": [{"name": "rendezvous", "port": launch.port or contracts.C10D_PORT,
                                "protocol": "TCP"}]}}


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


def _pod_spec(e: Experiment, *, env: Environment, group: GpuNodeGroup, code_config_map: dict, script: str, run_id: str,
              extra_env: list[dict], gpus: int, subdomain: str | None, region: str | None, efa: bool,
              git_commit: str | None = None) -> dict:
    efa_resources, efa_env = _efa(group, gpus, forks=forks_loader_workers(e)) if efa else ({}, [])
    device = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    requests = {**_requests(group, gpus), **device, **efa_resources}
    base_env = [{"name": ENV_IMAGE, "value": e.image}, {"name": ENV_RUN_ID, "value": run_id},
                {"name": ENV_EXPERIMENT, "value": e.name}, {"name": "PYTHONPATH", "value": contracts.CODE_ROOT},
                {"name": "PYTHONUNBUFFERED", "value": "1"},
                # the transport NCCL picked (its INIT lines name NET/OFI or NET/Socket, and aws-ofi-nccl's
                # version; workloads.train.harness.launch.nccl_transport and what_ran read them from the logs)
                {"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"},
                {"name": ENV_FABRIC, "value": e.fabric}]
    base_env += [{"name": JOB_ENV[k], "value": v} for k, v in what_ran_env(group).items()]  # the summary's what_ran
    if F.ZONE not in what_ran_env(group):  # a missing label reads as "" (what_ran then says why it is unknown)
        base_env.append({"name": JOB_ENV[F.ZONE], "valueFrom": {"fieldRef": {"fieldPath": ZONE_FIELD}}})
    if git_commit:
        base_env.append({"name": ENV_GIT_COMMIT, "value": git_commit})
    if region:
        base_env += [{"name": ENV_REGION, "value": region}, {"name": "AWS_DEFAULT_REGION", "value": region}]
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
            "env": base_env + extra_env + efa_env,
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
    if contracts.compiles(e, group.instance_type):  # Inductor and Triton caches, sized (COMPILE_CACHE_GIB)
        spec["volumes"].append({"name": "compile-cache", "emptyDir": {"sizeLimit": f"{COMPILE_CACHE_GIB}Gi"}})
        spec["containers"][0]["volumeMounts"].append({"name": "compile-cache", "mountPath": COMPILE_CACHE_DIR})
        spec["containers"][0]["env"].append({"name": "TORCHINDUCTOR_CACHE_DIR", "value": COMPILE_CACHE_DIR})
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


def training_job_manifest(e: Experiment, *, env: Environment, node_group: GpuNodeGroup, bucket: str, run_id: str,
                          code_config_map: dict, region: str | None = None, suspend: bool = False,
                          role: str = "TRAINER", git_commit: str | None = None) -> dict:
    """The Indexed Job that runs the experiment on max_nodes pods, one per node (``one_pod_per_node``).

    completions = parallelism = max_nodes. For an elastic run (min < max) a successPolicy marks the
    Job succeeded once pod 0 (the summary node) succeeded: torchrun starts with >= min nodes, every
    node that took part exits 0 at the end, and pods that never got a node are then terminated by
    the Job controller instead of waiting forever (JobSuccessPolicy, GA in Kubernetes 1.33).
    ``role="PSERVER"`` gives paddle's pserver Job (no GPUs, e.pservers pods).
    """
    job, svc = contracts.base_name(e, run_id), contracts.service_name(e, run_id)
    pserver = role == "PSERVER"
    name = contracts.paddle_job_names(job)[1] if pserver else job
    launch = contracts.launch_for(e, env, job=job, service=svc, gpus=e.gpus_per_node, role=role,
                                  instance_type=node_group.instance_type)
    # pservers keep their logs and summary apart: the launcher on index 0 writes summary.json.
    sub = "pserver/" if pserver else ""
    results_dir = env.experiment_results_dir(e) + ("/pserver" if pserver else "")
    # pservers serve until their trainers are done: the trainer Job's summary.json (on the shared claim, written
    # by its index 0 whatever happened) stops them, so a failed trainer Job never leaves them billing.
    script = contracts.launcher_script(launch.argv, results_dir=results_dir,
                                       results_uri=env.experiment_results_uri(bucket, e) + sub,
                                       experiment=e.name, prelude=launch.prelude, modules=launch.modules,
                                       pins=launch.pins, launched=launch.launched,
                                       stop_with=f"{env.experiment_results_dir(e)}/{SUMMARY_FILE}" if pserver else None)
    extra_env = [{"name": k, "value": v} for k, v in sorted(launch.env.items())]
    if e.framework == "paddle":  # a pserver's prelude overrides POD_IP with its DNS name (contracts.paddle_env)
        extra_env += [pod_ip_env("POD_IP"), pod_ip_env(ENV_POD_IP)]
    pods = e.pservers if pserver else e.max_nodes
    meta = experiment_labels(e, run_id=run_id, instance=job, component="pserver" if pserver else "training")
    spec = {
        "completionMode": "Indexed",
        "completions": pods, "parallelism": pods,
        "backoffLimit": e.max_restarts if e.framework == "pytorch" else 0,
        "activeDeadlineSeconds": e.timeout_minutes * 60,
        "suspend": suspend,
        "podFailurePolicy": training_failure_policy(),
        "template": {
            "metadata": {"labels": {**meta, PEERS_LABEL: job}, "annotations": dict(NOT_EVICTABLE)},
            "spec": _pod_spec(e, env=env, group=node_group, code_config_map=code_config_map, script=script,
                              run_id=run_id, extra_env=extra_env, gpus=0 if pserver else e.gpus_per_node, subdomain=svc,
                              region=region, efa=not pserver, git_commit=git_commit)},
    }
    spec["template"]["spec"]["affinity"] = one_pod_per_node(job, pserver=pserver)
    if e.elastic and not pserver:
        # Done when pod 0 succeeded: it writes and uploads the summary, and it exits 0 only when
        # torchrun finished with >= min_nodes. A rule of succeededCount: min_nodes could be met by
        # the other pods first, and the Job controller then removes the lingering pods, pod 0
        # among them, in the middle of its upload ("lingering pods are removed": batch/v1
        # SuccessPolicy; the leader example of the Kubernetes 1.33 GA post, "Job's SuccessPolicy
        # Goes GA", uses succeededIndexes "0" with succeededCount 1).
        spec["successPolicy"] = {"rules": [{"succeededIndexes": "0", "succeededCount": 1}]}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": metadata(name, env.namespace, label_set=meta, annotations=SKIP_AWAIT), "spec": spec}


def evaluation_job_manifest(e: Experiment, *, env: Environment, node_group: GpuNodeGroup, bucket: str, run_id: str,
                            code_config_map: dict, region: str | None = None, git_commit: str | None = None) -> dict:
    """One pod on one GPU that evaluates the training checkpoint from shared storage.

    Created suspended; the eval gate resumes it once the training Job is Complete.
    """
    job = f"{contracts.base_name(e, run_id)}-eval"
    results_dir = f"{env.experiment_results_dir(e)}/{EVAL_DIR}"
    argv = ("python3",) + contracts.evaluation_argv(e.workload, results_dir=env.experiment_results_dir(e),
                                                    data_dir=env.datasets_dir)
    script = contracts.launcher_script(argv, results_dir=results_dir,
                                       results_uri=f"{env.experiment_results_uri(bucket, e)}{EVAL_DIR}/",
                                       experiment=f"{e.name}-eval")
    meta = experiment_labels(e, run_id=run_id, instance=contracts.base_name(e, run_id), component="evaluation")
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": metadata(job, env.namespace, label_set=meta, annotations=SKIP_AWAIT),
            "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 1, "suspend": True,
                     "activeDeadlineSeconds": EVAL_TIMEOUT_MINUTES * 60,
                     "podFailurePolicy": copy.deepcopy(IGNORE_DISRUPTIONS),
                     "template": {"metadata": {"labels": dict(meta), "annotations": dict(NOT_EVICTABLE)},
                                  "spec": _pod_spec(e, env=env, group=node_group, code_config_map=code_config_map,
                                                    script=script, run_id=run_id, extra_env=[], gpus=1, subdomain=None,
                                                    region=region, efa=False, git_commit=git_commit)}}}


def gate_rbac_manifests(name: str, *, namespace: str, jobs: list[str]) -> list[dict]:
    """ServiceAccount, Role and RoleBinding that let a gate read and resume the named Jobs only."""
    meta = metadata(name, namespace, label_set=labels(component="gate"))
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(meta),
         # resourceNames works for get and patch (Kubernetes RBAC docs), so nothing else is reachable.
         "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": sorted(set(jobs)),
                    "verbs": ["get", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": dict(meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]


def gate_job_manifest(name: str, *, namespace: str, service_account: str, spec: str, deadline_seconds: int,
                      label_set: Mapping[str, str], fingerprint: str, code_config_map: dict) -> dict:
    """A CPU-only Job on the system nodes running ``python3 -m workloads.train.control.gate`` with ``spec``
    (contracts.gate_spec) in EKSBENCH_GATE, from the code ConfigMap mounted at contracts.CODE_ROOT.

    ``label_set``: experiment_labels(..., component="gate"). ``fingerprint`` (a hash of the Jobs it
    resumes) sits in the pod template, so replacing a gated Job replaces its gate too and the new
    Job does not stay suspended.
    """
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": metadata(name, namespace, label_set=label_set, annotations=SKIP_AWAIT),
            "spec": {"backoffLimit": 6, "activeDeadlineSeconds": deadline_seconds,
                     "template": {
                         "metadata": {"labels": dict(label_set),
                                      "annotations": {"eksbench.io/gated-jobs": fingerprint}},
                         # Restricted like every pod; the gate keeps its API token (it reads and resumes Jobs).
                         "spec": harden_pod_spec({
                             "restartPolicy": "OnFailure", "serviceAccountName": service_account,
                             "nodeSelector": dict(SYSTEM_NODE_LABEL), "enableServiceLinks": False,
                             "containers": [{"name": "gate", "image": GATE_IMAGE,
                                             "command": ["python3", "-m", contracts.GATE_MODULE],
                                             "env": [{"name": ENV_GATE, "value": spec},
                                                     {"name": "PYTHONPATH", "value": contracts.CODE_ROOT}],
                                             "volumeMounts": [code_mount()],
                                             "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                                                           "limits": {"cpu": "100m", "memory": "64Mi"}}}],
                             "volumes": [code_volume(code_config_map)]})}}}


def fingerprint(*manifests: dict) -> str:
    return hashlib.sha256(json.dumps(manifests, sort_keys=True).encode()).hexdigest()[:16]


def completion_waits(e: Experiment, *, run_id: str) -> list[tuple[str, str | None]]:
    """What "experiment e is finished" means to a gate: its training Job, and its evaluation Job
    unless the training failed (then the evaluation is never started)."""
    job = contracts.base_name(e, run_id)
    return [(job, None), (f"{job}-eval", job)] if e.evaluate else [(job, None)]


def experiment_manifests(e: Experiment, *, env: Environment, node_group: GpuNodeGroup, bucket: str, run_id: str,
                         code_config_map: dict, region: str | None = None,
                         after: list[tuple[str, str | None]] = (), after_minutes: int = 0,
                         git_commit: str | None = None) -> dict[str, dict]:
    """Every object of one experiment, keyed by role (the Pulumi child is named "<name>-<role>"), in
    creation order: svc, job, [pserver], [eval], [gate-sa, gate-role, gate-binding], [eval-gate], [gate].

    ``after``: gate waits (see contracts.gate_spec) that must be done before this experiment starts;
    its Jobs are then created suspended and a gate resumes them. ``after_minutes`` bounds that wait.
    ``git_commit``: the commit of the shipped code (code_files.read_git_commit), given to the
    pods as EKSBENCH_GIT_COMMIT for the summary; computed by the caller, as these builders do no I/O.
    """
    job = contracts.base_name(e, run_id)
    common = dict(env=env, node_group=node_group, bucket=bucket, run_id=run_id, code_config_map=code_config_map,
                  region=region, git_commit=git_commit)
    out = {"svc": headless_service_manifest(e, env=env, run_id=run_id),
           "job": training_job_manifest(e, suspend=bool(after), **common)}
    if e.framework == "paddle":
        out["pserver"] = training_job_manifest(e, suspend=bool(after), role="PSERVER", **common)
    if e.evaluate:
        out["eval"] = evaluation_job_manifest(e, **common)
        # A rerun training (replaced Job) must be evaluated again: tie the eval pod template to it.
        out["eval"]["spec"]["template"]["metadata"]["annotations"]["eksbench.io/training"] = fingerprint(out["job"])
    if not (after or e.evaluate):
        return out
    gate_sa = f"{job}-gate"
    resumed = [out[r]["metadata"]["name"] for r in ("job", "pserver") if r in out]
    reach = [n for pair in after for n in pair if n] + resumed + ([f"{job}-eval"] if e.evaluate else [])
    rbac = gate_rbac_manifests(gate_sa, namespace=env.namespace, jobs=reach)
    out.update(zip(("gate-sa", "gate-role", "gate-binding"), rbac))
    meta = experiment_labels(e, run_id=run_id, instance=job, component="gate")
    slack = 60  # minutes for scheduling, node scale-up and image pulls
    if e.evaluate:
        out["eval-gate"] = gate_job_manifest(
            f"{job}-eval-gate", namespace=env.namespace, service_account=gate_sa, label_set=meta,
            code_config_map=code_config_map,
            spec=contracts.gate_spec(namespace=env.namespace, wait=[(job, None)], resume=[f"{job}-eval"],
                                     require_success=[job]),
            deadline_seconds=(after_minutes + e.timeout_minutes + slack) * 60, fingerprint=fingerprint(out["eval"]))
    if after:
        out["gate"] = gate_job_manifest(
            f"{job}-gate", namespace=env.namespace, service_account=gate_sa, label_set=meta,
            code_config_map=code_config_map,
            spec=contracts.gate_spec(namespace=env.namespace, wait=list(after), resume=resumed),
            deadline_seconds=(after_minutes + slack) * 60,
            fingerprint=fingerprint(*[out[r] for r in ("job", "pserver") if r in out]))
    return out


def suite_budget_minutes(e: Experiment) -> int:
    """How long a successor may have to wait for ``e``: its timeout, its evaluation and start-up slack."""
    return experiment_budget_minutes(e)
