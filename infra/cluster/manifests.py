"""Kubernetes objects the environment needs, built as plain dicts (no Pulumi, no I/O).

The infra components register exactly these; the tests validate each against the
Kubernetes OpenAPI schema of the pinned version.
"""

from __future__ import annotations

from core.catalog.pins import DEVICE_PLUGIN_IMAGE, ETCD_IMAGE, efa_plugin_image
from infra.access.pod_security import (
    NO_GPUS_ENV,
    pod_security_context,
    restricted_container_security_context,
)
from infra.environment import (
    ETCD_PORT,
    GPU_NODE_LABEL_KEY,
    SYSTEM_NODE_LABEL,
    Environment,
)
from infra.labels import labels, metadata


def _meta(name: str, namespace: str | None = None, app: str = "eksbench") -> dict:
    return metadata(name, namespace, label_set=labels(app))


def namespace_manifest(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name)}


def service_account_manifest(env: Environment) -> dict:
    # No IRSA annotation and no secrets: EKS Pod Identity hands this account its role.
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(env.service_account, env.namespace), "automountServiceAccountToken": False}


# etcd runs as UID 65532, the "nonroot" user of the distroless images etcd's release image
# is built on (gcr.io/distroless/static-debian11); etcd needs no home or passwd entry.
ETCD_UID = 65532
ETCD_DATA_VOLUME = "/var/lib/etcd"


def etcd_manifests(env: Environment) -> list[dict]:
    """A single etcd member for torch elastic rendezvous, on the system node group.

    Parity with etcd's release image for v3.5.17 (etcd-io/etcd, Dockerfile-release.amd64 at
    tag v3.5.17, commit 507c0de87bd5034e3de4ab76ebf96b54dae0cd52): the binary is
    /usr/local/bin/etcd (its CMD), and /var/lib/etcd is the image's WORKDIR, root-owned, so a
    non-root etcd writes there only through a volume. The emptyDir is world-writable; the
    data dir is a sub-directory that etcd itself creates with mode 0700
    (client/pkg/fileutil.TouchDirAll, PrivateDirMode), so etcd logs no "check file
    permission" warning. Rendezvous state is ephemeral (torchrun re-creates it), so an
    emptyDir suffices. Client traffic is plain HTTP without auth: the NetworkPolicy of
    infra/access/network_policies.py admits only the experiment's pods.
    """
    selector = {"app.kubernetes.io/name": "etcd"}
    url = f"http://{env.etcd_endpoint}"
    probe = {"httpGet": {"path": "/health", "port": ETCD_PORT}}  # etcd v3.5.17 etcdhttp.PathHealth
    container = {
        "name": "etcd", "image": ETCD_IMAGE,
        "command": ["/usr/local/bin/etcd", "--name=etcd0", f"--data-dir={ETCD_DATA_VOLUME}/data", "--enable-v2=true",
                    f"--listen-client-urls=http://0.0.0.0:{ETCD_PORT}", f"--advertise-client-urls={url}",
                    "--listen-peer-urls=http://127.0.0.1:2380", "--initial-cluster=etcd0=http://127.0.0.1:2380",
                    "--initial-advertise-peer-urls=http://127.0.0.1:2380"],
        "ports": [{"name": "client", "containerPort": ETCD_PORT, "protocol": "TCP"}],
        "readinessProbe": {**probe, "periodSeconds": 5},
        "livenessProbe": {**probe, "initialDelaySeconds": 10, "periodSeconds": 10, "failureThreshold": 6},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": restricted_container_security_context(run_as_user=ETCD_UID),
        "env": [dict(NO_GPUS_ENV)],  # no GPUs for a container that asks for none (infra/access/pod_security.py)
        "volumeMounts": [{"name": "data", "mountPath": ETCD_DATA_VOLUME}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta("etcd", env.namespace, "etcd"),
        "spec": {"replicas": 1, "selector": {"matchLabels": selector}, "strategy": {"type": "Recreate"},
                 "template": {"metadata": {"labels": labels("etcd")},
                              "spec": {"nodeSelector": dict(SYSTEM_NODE_LABEL), "automountServiceAccountToken": False,
                                       "priorityClassName": ETCD_PRIORITY_CLASS,
                                       "enableServiceLinks": False,
                                       "securityContext": pod_security_context(run_as_user=ETCD_UID, fs_group=None),
                                       "containers": [container],
                                       "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": _meta("etcd", env.namespace, "etcd"),
               "spec": {"type": "ClusterIP", "selector": selector,
                        "ports": [{"name": "client", "port": ETCD_PORT, "targetPort": ETCD_PORT, "protocol": "TCP"}]}}
    return [deployment, service]


# Above every training pod (they name no priority class: priority 0), so the scheduler preempts a
# training pod rather than leave etcd Pending on a full system node (Kubernetes "Pod Priority and
# Preemption"; user-defined values go up to 1,000,000,000).
ETCD_PRIORITY_CLASS = "eksbench-rendezvous"
ETCD_PRIORITY = 1_000_000


def etcd_protection_manifests(env: Environment) -> list[dict]:
    """etcd's PriorityClass and PodDisruptionBudget. torch's agent polls the rendezvous every 0.1 s and
    the etcd backend turns any error into RendezvousConnectionError (torch/distributed/elastic/rendezvous
    etcd_rendezvous_backend.get_state, dynamic_rendezvous), so an etcd moved by a node drain or a managed
    node group update fails every PyTorch run on the cluster and loses the rendezvous state (an emptyDir).
    ``maxUnavailable: 0`` refuses voluntary evictions of the one member (policy/v1: a drain and the Cluster
    Autoscaler wait; an EKS managed node group update would fail with PodEvictionFailure after 15 minutes, so the
    system group's updates are forced, ``infra.cluster.node_group.system_node_group_spec``, and evict it then;
    scale-down by desired size and deletion of a group do not respect budgets); ``unhealthyPodEvictionPolicy:
    AlwaysAllow`` still lets a member that is not Ready go. Involuntary loss (a node failure) is not
    covered: c10d, whose store lives in the agents, is the rendezvous to choose for long production runs."""
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": _meta(ETCD_PRIORITY_CLASS),
                "value": ETCD_PRIORITY, "globalDefault": False,
                "description": "etcd for torch elastic rendezvous: above the training pods"}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta("etcd", env.namespace, "etcd"),
           "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app.kubernetes.io/name": "etcd"}},
                    "unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    return [priority, pdb]


def _on_groups(node_groups: list[str]) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": GPU_NODE_LABEL_KEY, "operator": "In", "values": sorted(node_groups)}]}]}}}


DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
# Upstream's toleration of the GPU taint (NVIDIA static manifest below); it also covers our
# GPU_TAINT (nvidia.com/gpu=true:NoSchedule) on EFA groups, which are GPU groups.
GPU_TAINT_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def device_plugin_manifest(node_groups: list[str]) -> dict:
    """The NVIDIA device plugin on the named GPU node groups only (AL2023 NVIDIA lacks it).

    Parity with NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml at tag
    v0.17.1 (commit 3c378193fcebf6e955f0d65bd6f2aeed099ad8ea): same image, env
    FAIL_ON_INIT_ERROR=false, container securityContext (no privilege escalation, ALL
    capabilities dropped), the one hostPath /var/lib/kubelet/device-plugins, toleration
    nvidia.com/gpu Exists NoSchedule, priorityClass system-node-critical, RollingUpdate; no
    hostNetwork. Ours adds, each only taking privileges away: a node affinity to our GPU
    groups, no service-account token (the plugin talks to the kubelet's socket only, never
    to the API server) and the RuntimeDefault seccomp profile.
    """
    container = {
        "name": "nvidia-device-plugin-ctr", "image": DEVICE_PLUGIN_IMAGE,
        "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "device-plugin", "mountPath": DEVICE_PLUGIN_DIR}],
    }
    return _device_plugin_daemon_set("nvidia-device-plugin", container, node_groups,
                                     tolerations=[dict(GPU_TAINT_TOLERATION)])


def efa_device_plugin_manifest(node_groups: list[str], *, region: str) -> dict:
    """The AWS EFA device plugin, which advertises ``vpc.amazonaws.com/efa`` on EFA groups.

    Parity with aws/eks-charts stable/aws-efa-k8s-device-plugin chart v0.5.11, the last chart
    whose appVersion is our EFA_PLUGIN_TAG v0.5.6 (commit
    d0709a859a8bc7cc5b941cc55339a86c3a48be19; templates/daemonset.yaml with the default
    values.yaml): hostNetwork true (no dnsPolicy set), hostPath mounts of
    /var/lib/kubelet/device-plugins and /dev/infiniband/ (without the latter the plugin finds
    no EFA device and advertises none), container securityContext from values
    (allowPrivilegeEscalation false, drop ALL, runAsNonRoot false; not privileged: that came
    with chart v0.5.16 / image v0.5.9 together with a /opt/aws/neuron mount for Neuron
    devices), requests 10m CPU / 20Mi, automountServiceAccountToken false, toleration
    CriticalAddonsOnly Exists, priorityClass system-node-critical, RollingUpdate. The chart
    takes no args and no env. Ours replaces the chart's instance-type affinity with our EFA
    node groups, tolerates our GPU taint and adds the RuntimeDefault seccomp profile.
    """
    container = {
        "name": "aws-efa-k8s-device-plugin", "image": efa_plugin_image(region),
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": False},
        "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}},
        "volumeMounts": [{"name": "device-plugin", "mountPath": DEVICE_PLUGIN_DIR},
                         {"name": "infiniband-volume", "mountPath": "/dev/infiniband/"}],
    }
    return _device_plugin_daemon_set(
        "aws-efa-k8s-device-plugin", container, node_groups, host_network=True,
        tolerations=[{"key": "CriticalAddonsOnly", "operator": "Exists"}, dict(GPU_TAINT_TOLERATION)],
        extra_volumes=[{"name": "infiniband-volume", "hostPath": {"path": "/dev/infiniband/"}}])


def _device_plugin_daemon_set(name: str, container: dict, node_groups: list[str], *, tolerations: list[dict],
                              host_network: bool = False, extra_volumes: list[dict] = ()) -> dict:
    selector = {"app.kubernetes.io/name": name}
    pod = {"priorityClassName": "system-node-critical", "affinity": _on_groups(node_groups),
           "automountServiceAccountToken": False, "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
           "tolerations": tolerations, "containers": [container],
           "volumes": [{"name": "device-plugin", "hostPath": {"path": DEVICE_PLUGIN_DIR}}, *extra_volumes]}
    if host_network:
        pod["hostNetwork"] = True
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta(name, "kube-system", name),
        "spec": {"selector": {"matchLabels": selector}, "updateStrategy": {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": labels(name)}, "spec": pod}}}


def storage_class_manifest(kind: str) -> dict:
    provisioner = {"efs": "efs.csi.aws.com", "fsx": "fsx.csi.aws.com"}[kind]
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": _meta(f"eksbench-{kind}"),
            "provisioner": provisioner, "reclaimPolicy": "Retain", "volumeBindingMode": "Immediate"}


def persistent_volume_manifest(kind: str, *, file_system_id: str, env: Environment, dns_name: str = "",
                               mount_name: str = "", capacity_gib: int = 1200, access_point_id: str = "") -> dict:
    """A static PV on the stack's file system. Retain: deleting the claim never deletes data.

    ``access_point_id`` (EFS only) mounts through an EFS access point, whose POSIX user lets
    non-root pods (infra/pod_security.RUN_AS_USER) write: a new file system's root is
    root-owned 0755. The EFS CSI driver takes it in the volume handle as
    ``<file system id>::<access point id>`` (kubernetes-sigs/aws-efs-csi-driver,
    examples/kubernetes/access_points).
    """
    if access_point_id and kind != "efs":
        raise ValueError("access_point_id: EFS only (FSx for Lustre has no access points)")
    if kind == "efs":
        handle = f"{file_system_id}::{access_point_id}" if access_point_id else file_system_id
        csi = {"driver": "efs.csi.aws.com", "volumeHandle": handle}
        mount_options = ["tls"]  # encryption in transit via the EFS mount helper
    else:
        csi = {"driver": "fsx.csi.aws.com", "volumeHandle": file_system_id,
               "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name}}
        mount_options = ["flock"]
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": _meta(f"{env.claim_name}-{env.namespace}"),
            "spec": {"capacity": {"storage": f"{capacity_gib}Gi"}, "volumeMode": "Filesystem",
                     "accessModes": ["ReadWriteMany"], "persistentVolumeReclaimPolicy": "Retain",
                     # "": no StorageClass, so nothing can provision dynamically (the CSI drivers have no IAM).
                     "storageClassName": "", "mountOptions": mount_options, "csi": csi,
                     "claimRef": {"namespace": env.namespace, "name": env.claim_name}}}


def persistent_volume_claim_manifest(kind: str, env: Environment, capacity_gib: int = 1200) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(env.claim_name, env.namespace),
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "volumeName": f"{env.claim_name}-{env.namespace}",
                     "resources": {"requests": {"storage": f"{capacity_gib}Gi"}}}}
