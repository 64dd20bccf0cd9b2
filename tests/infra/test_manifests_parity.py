"""Our hand-written cluster manifests held against upstream's, at the pinned versions.

The upstream files are vendored under tests/infra/upstream/ (CI has no network); each
names its repository, path, tag and commit in its header. What must match: containers
(image, command, args, env, resources, volumeMounts, securityContext), volumes,
hostNetwork, dnsPolicy, priorityClass, tolerations, updateStrategy. What may differ is
listed in ALLOWED_POD_EXTRAS: scheduling narrowed to our node groups, and settings that
only take privileges away.
"""

from pathlib import Path

import pytest
import yaml

from core.catalog.pins import DEVICE_PLUGIN_IMAGE, EFA_PLUGIN_TAG, ETCD_IMAGE
from core.contract.results_location import ResultsLocation
from infra.cluster.manifests import (
    device_plugin_manifest,
    efa_device_plugin_manifest,
    etcd_manifests,
)
from infra.environment import GPU_TAINT, Environment
from tests.support.k8s_schema import assert_valid

UPSTREAM = Path(__file__).parent / "upstream"
ENV = Environment(namespace="eksbench", service_account="eksbench-trainer", claim_name="eksbench-shared",
                  mount_path="/data", datasets_dir="/data/datasets", results_dir="/data/results/run-001",
                  etcd_endpoint="etcd.eksbench.svc.cluster.local:2379",
                  results=ResultsLocation(None, "eksbench", "dev", "run-001"),
                  datasets_prefix_uri=None)

# Pod-spec fields ours may have that upstream lacks (or sets otherwise), each with why.
ALLOWED_POD_EXTRAS = {
    "affinity": "our GPU/EFA node groups instead of upstream's instance-type list",
    "securityContext": "pod-level RuntimeDefault seccomp only (checked below)",
    "automountServiceAccountToken": "false: the plugins talk to the kubelet socket, never to the API server",
}
# Tolerations ours may add: our GPU taint sits on every GPU group, EFA groups included.
ALLOWED_EXTRA_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
PARITY_POD_FIELDS = ("hostNetwork", "hostPID", "hostIPC", "dnsPolicy", "priorityClassName")
PARITY_CONTAINER_FIELDS = ("command", "args", "env", "resources", "volumeMounts", "securityContext", "name")


def upstream(name: str) -> dict:
    return yaml.safe_load((UPSTREAM / name).read_text())


def pod(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def image_path(image: str) -> str:
    """The image without its registry host: the EFA image is pulled from the cluster's region."""
    return image.split("/", 1)[1]


def parity_problems(ours: dict, theirs: dict) -> list[str]:
    """What in ``ours`` differs from ``theirs`` beyond the allowed extras; empty when at parity."""
    problems = []
    mine, up = pod(ours), pod(theirs)
    for key in PARITY_POD_FIELDS:
        if mine.get(key) != up.get(key):
            problems.append(f"pod {key}: ours {mine.get(key)!r}, upstream {up.get(key)!r}")
    if ours["spec"].get("updateStrategy") != theirs["spec"].get("updateStrategy"):
        problems.append(f"updateStrategy: ours {ours['spec'].get('updateStrategy')}, "
                        f"upstream {theirs['spec'].get('updateStrategy')}")
    if up.get("automountServiceAccountToken") is False and mine.get("automountServiceAccountToken") is not False:
        problems.append("automountServiceAccountToken: upstream false, ours mounts the token")
    for key in set(mine) - set(up) - set(ALLOWED_POD_EXTRAS) - {"containers", "volumes", "tolerations"}:
        problems.append(f"pod {key}: ours only ({mine[key]!r})")
    if mine.get("securityContext", {}) not in ({}, {"seccompProfile": {"type": "RuntimeDefault"}}):
        problems.append(f"pod securityContext: {mine['securityContext']}")
    for t in up.get("tolerations", []):
        if t not in mine.get("tolerations", []):
            problems.append(f"toleration missing: {t}")
    for t in mine.get("tolerations", []):
        if t not in up.get("tolerations", []) and t not in ALLOWED_EXTRA_TOLERATIONS:
            problems.append(f"toleration not upstream's: {t}")
    volumes = {v["name"]: v for v in mine.get("volumes", [])}
    up_volumes = {v["name"]: v for v in up.get("volumes", [])}
    if volumes != up_volumes:
        problems.append(f"volumes: ours {sorted(volumes.values(), key=str)}, upstream {sorted(up_volumes.values(), key=str)}")
    if len(mine["containers"]) != len(up["containers"]):
        return problems + [f"containers: ours {len(mine['containers'])}, upstream {len(up['containers'])}"]
    for c, u in zip(mine["containers"], up["containers"]):
        if image_path(c["image"]) != image_path(u["image"]):
            problems.append(f"image: ours {c['image']}, upstream {u['image']}")
        for key in PARITY_CONTAINER_FIELDS:
            if c.get(key) != u.get(key):
                problems.append(f"container {key}: ours {c.get(key)!r}, upstream {u.get(key)!r}")
    return problems


# The EFA plugin's DaemonSet as it was hand-written before the parity fix (no hostNetwork, no
# /dev/infiniband): it would have run and advertised no vpc.amazonaws.com/efa device at all.
OLD_EFA = yaml.safe_load(f"""
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: aws-efa-k8s-device-plugin, namespace: kube-system}}
spec:
  selector: {{matchLabels: {{app.kubernetes.io/name: aws-efa-k8s-device-plugin}}}}
  updateStrategy: {{type: RollingUpdate}}
  template:
    metadata: {{labels: {{app.kubernetes.io/name: aws-efa-k8s-device-plugin}}}}
    spec:
      priorityClassName: system-node-critical
      tolerations: [{{key: nvidia.com/gpu, operator: Equal, value: "true", effect: NoSchedule}}]
      containers:
      - name: aws-efa-k8s-device-plugin
        image: 602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:{EFA_PLUGIN_TAG}
        securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}}}
        volumeMounts: [{{name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}}]
      volumes: [{{name: device-plugin, hostPath: {{path: /var/lib/kubelet/device-plugins}}}}]
""")


@pytest.fixture(scope="module")
def efa_chart():
    return upstream("aws-efa-k8s-device-plugin-chart-v0.5.11.yaml")


def test_efa_plugin_matches_the_chart_of_its_tag(efa_chart):
    ours = efa_device_plugin_manifest(["p5"], region="us-east-1")
    assert_valid(ours)
    assert parity_problems(ours, efa_chart) == []
    spec = pod(ours)
    # The two things without which the plugin advertises no EFA device, spelled out.
    assert spec["hostNetwork"] is True
    assert {"name": "infiniband-volume", "hostPath": {"path": "/dev/infiniband/"}} in spec["volumes"]
    assert {"name": "infiniband-volume", "mountPath": "/dev/infiniband/"} in spec["containers"][0]["volumeMounts"]


def test_the_old_efa_manifest_fails_parity(efa_chart):
    problems = "\n".join(parity_problems(OLD_EFA, efa_chart))
    assert "hostNetwork" in problems and "infiniband-volume" in problems


def test_efa_pin_is_the_charts_app_version(efa_chart):
    image = pod(efa_chart)["containers"][0]["image"]
    assert image.endswith(f":{EFA_PLUGIN_TAG}")
    # Chart v0.5.16 (image v0.5.9) made the plugin privileged; ours must not be until the pin moves.
    assert "privileged" not in pod(efa_device_plugin_manifest(["p5"], region="us-east-1"))["containers"][0][
        "securityContext"]


def test_efa_plugin_keeps_our_scheduling():
    spec = pod(efa_device_plugin_manifest(["p5", "p4d"], region="us-east-1"))
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "eksbench.io/pool", "operator": "In", "values": ["p4d", "p5"]}]}]
    gpu = [t for t in spec["tolerations"] if t["key"] == GPU_TAINT["key"]]
    assert gpu and gpu[0]["effect"] == GPU_TAINT["effect"] and gpu[0]["operator"] == "Exists"


def test_nvidia_plugin_matches_the_static_manifest_of_its_tag():
    theirs = upstream("nvidia-device-plugin-v0.17.1.yml")
    assert pod(theirs)["containers"][0]["image"] == DEVICE_PLUGIN_IMAGE
    ours = device_plugin_manifest(["p3"])
    assert_valid(ours)
    assert parity_problems(ours, theirs) == []


def test_etcd_follows_its_release_image():
    dockerfile = (UPSTREAM / "etcd-v3.5.17-Dockerfile-release.amd64").read_text()
    assert ETCD_IMAGE.endswith(":v3.5.17")
    lines = [line.split(None, 1) for line in dockerfile.splitlines() if line and not line.startswith("#")]
    cmd = yaml.safe_load([rest for op, rest in lines if op == "CMD"][-1])
    workdirs = [rest.strip().rstrip("/") for op, rest in lines if op == "WORKDIR"]
    assert not [op for op, _ in lines if op == "USER"]  # the image runs as root unless told otherwise

    deployment, service = etcd_manifests(ENV)
    assert_valid(deployment)
    assert_valid(service)
    spec = pod(deployment)
    (c,) = spec["containers"]
    assert c["command"][0] == cmd[0] == "/usr/local/bin/etcd"
    ctx = {**spec["securityContext"], **c["securityContext"]}
    assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] > 0
    assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]} and ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    # The data dir lives on a volume (the image's WORKDIR is root-owned), below its root so that
    # etcd creates it 0700 itself.
    data_dir = next(a.split("=", 1)[1] for a in c["command"] if a.startswith("--data-dir="))
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    (mount,) = [m for m in mounts if data_dir.startswith(m + "/")]
    assert mount in workdirs
    assert {"name": mounts[mount], "emptyDir": {"sizeLimit": "1Gi"}} in spec["volumes"]
    assert "--enable-v2=true" in c["command"]
    assert spec["automountServiceAccountToken"] is False


def test_efs_volume_through_an_access_point():
    from infra.cluster.manifests import persistent_volume_manifest

    pv = persistent_volume_manifest("efs", file_system_id="fs-0123", access_point_id="fsap-0456", env=ENV)
    assert_valid(pv)
    assert pv["spec"]["csi"]["volumeHandle"] == "fs-0123::fsap-0456"
    assert persistent_volume_manifest("efs", file_system_id="fs-0123", env=ENV)["spec"]["csi"]["volumeHandle"] == "fs-0123"
    with pytest.raises(ValueError):
        persistent_volume_manifest("fsx", file_system_id="fs-0123", access_point_id="fsap-0456", env=ENV)
