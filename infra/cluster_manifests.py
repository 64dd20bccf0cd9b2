"""Kubernetes objects the environment needs, built as plain dicts (no Pulumi, no I/O).

The infra components register exactly these; the tests validate each against the
Kubernetes OpenAPI schema of the pinned version.
"""

from __future__ import annotations

from infra.environment import (
    ETCD_PORT,
    GPU_NODE_LABEL_KEY,
    GPU_TOLERATION,
    SYSTEM_NODE_LABEL,
    Environment,
)
from infra.labels import labels, metadata
from spec.pins import DEVICE_PLUGIN_IMAGE, ETCD_IMAGE, efa_plugin_image


def _meta(name: str, namespace: str | None = None, app: str = "eksbench") -> dict:
    return metadata(name, namespace, label_set=labels(app))


def namespace_manifest(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name)}


def service_account_manifest(env: Environment) -> dict:
    # No IRSA annotation and no secrets: EKS Pod Identity hands this account its role.
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(env.service_account, env.namespace), "automountServiceAccountToken": False}


def etcd_manifests(env: Environment) -> list[dict]:
    """A single etcd member for torch elastic rendezvous, on the system node group.

    Rendezvous state is ephemeral (torchrun re-creates it), so an emptyDir suffices.
    """
    selector = {"app.kubernetes.io/name": "etcd"}
    url = f"http://{env.etcd_endpoint}"
    container = {
        "name": "etcd", "image": ETCD_IMAGE,
        "command": ["etcd", "--name=etcd0", "--data-dir=/var/lib/etcd", "--enable-v2=true",
                    f"--listen-client-urls=http://0.0.0.0:{ETCD_PORT}", f"--advertise-client-urls={url}",
                    "--listen-peer-urls=http://127.0.0.1:2380", "--initial-cluster=etcd0=http://127.0.0.1:2380",
                    "--initial-advertise-peer-urls=http://127.0.0.1:2380"],
        "ports": [{"name": "client", "containerPort": ETCD_PORT}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": ETCD_PORT}, "periodSeconds": 5},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000},
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta("etcd", env.namespace, "etcd"),
        "spec": {"replicas": 1, "selector": {"matchLabels": selector}, "strategy": {"type": "Recreate"},
                 "template": {"metadata": {"labels": labels("etcd")},
                              "spec": {"nodeSelector": dict(SYSTEM_NODE_LABEL), "containers": [container],
                                       "volumes": [{"name": "data", "emptyDir": {}}]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": _meta("etcd", env.namespace, "etcd"),
               "spec": {"type": "ClusterIP", "selector": selector,
                        "ports": [{"name": "client", "port": ETCD_PORT, "targetPort": ETCD_PORT}]}}
    return [deployment, service]


def _on_groups(node_groups: list[str]) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": GPU_NODE_LABEL_KEY, "operator": "In", "values": sorted(node_groups)}]}]}}}


def device_plugin_manifest(node_groups: list[str]) -> dict:
    """The NVIDIA device plugin on the named GPU node groups only (AL2023 NVIDIA lacks it)."""
    container = {
        "name": "nvidia-device-plugin", "image": DEVICE_PLUGIN_IMAGE,
        "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
    }
    return _device_plugin_daemon_set("nvidia-device-plugin", container, node_groups)


def efa_device_plugin_manifest(node_groups: list[str], *, region: str) -> dict:
    """The AWS EFA device plugin, which advertises ``vpc.amazonaws.com/efa`` on EFA groups."""
    container = {
        "name": "aws-efa-k8s-device-plugin", "image": efa_plugin_image(region),
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
    }
    return _device_plugin_daemon_set("aws-efa-k8s-device-plugin", container, node_groups)


def _device_plugin_daemon_set(name: str, container: dict, node_groups: list[str]) -> dict:
    selector = {"app.kubernetes.io/name": name}
    affinity = _on_groups(node_groups)
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta(name, "kube-system", name),
        "spec": {"selector": {"matchLabels": selector}, "updateStrategy": {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": labels(name)}, "spec": {
                     "priorityClassName": "system-node-critical", "affinity": affinity,
                     "tolerations": [dict(GPU_TOLERATION)], "containers": [container],
                     "volumes": [{"name": "device-plugin",
                                  "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]}}}}


def storage_class_manifest(kind: str) -> dict:
    provisioner = {"efs": "efs.csi.aws.com", "fsx": "fsx.csi.aws.com"}[kind]
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": _meta(f"eksbench-{kind}"),
            "provisioner": provisioner, "reclaimPolicy": "Retain", "volumeBindingMode": "Immediate"}


def persistent_volume_manifest(kind: str, *, file_system_id: str, env: Environment, dns_name: str = "",
                               mount_name: str = "", capacity_gib: int = 1200) -> dict:
    """A static PV on the stack's file system. Retain: deleting the claim never deletes data."""
    if kind == "efs":
        csi = {"driver": "efs.csi.aws.com", "volumeHandle": file_system_id}
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
