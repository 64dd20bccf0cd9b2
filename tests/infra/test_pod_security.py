"""infra/pod_security: the restricted profile, and a pod spec hardened with it stays valid and usable."""

import pytest

from infra.access.pod_security import (
    HOME_DIR,
    RUN_AS_USER,
    efa_container_security_context,
    harden_pod_spec,
    pod_security_context,
    restricted_container_security_context,
)
from tests.support.k8s_schema import assert_valid


def job(spec: dict) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "eksbench"},
            "spec": {"template": {"spec": spec}}}


def gpu_pod() -> dict:
    """The shape of workloads.pod_manifests.pod_spec: GPU limits, shared PVC, /dev/shm, code ConfigMap."""
    return {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "command": ["/bin/sh", "-c", "true"],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": {"limits": {"nvidia.com/gpu": "8"}},
        "volumeMounts": [{"name": "shared", "mountPath": "/data"}, {"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": "code", "mountPath": "/opt/eksbench/workloads/train", "readOnly": True}]}],
        "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "eksbench-shared"}},
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                    {"name": "code", "configMap": {"name": "eksbench-code-abc"}}]}


def test_restricted_container_context_meets_the_restricted_standard():
    ctx = restricted_container_security_context()
    assert ctx == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                   "readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": RUN_AS_USER,
                   "runAsGroup": RUN_AS_USER, "seccompProfile": {"type": "RuntimeDefault"}}
    assert "privileged" not in ctx
    with pytest.raises(ValueError):
        restricted_container_security_context(run_as_user=0)
    assert "runAsUser" not in restricted_container_security_context(run_as_user=None)


def test_pod_context_never_walks_a_large_volume():
    ctx = pod_security_context()
    assert ctx["fsGroupChangePolicy"] == "OnRootMismatch" and ctx["runAsNonRoot"] is True
    assert pod_security_context(fs_group=None).get("fsGroup") is None


def test_efa_context_is_root_with_ipc_lock_only():
    ctx = efa_container_security_context()
    assert ctx["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    assert ctx["allowPrivilegeEscalation"] is False and "privileged" not in ctx


def test_hardened_gpu_pod_is_valid_and_has_a_writable_home_and_tmp():
    spec = harden_pod_spec(gpu_pod())
    assert_valid(job(spec))
    (c,) = spec["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True and c["securityContext"]["runAsNonRoot"] is True
    assert {"name": "HOME", "value": HOME_DIR} in c["env"]
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert {HOME_DIR, "/tmp", "/dev/shm", "/data"} <= mounts
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # GPU limits and volumes are untouched; the input is not mutated.
    assert c["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert "securityContext" not in gpu_pod()["containers"][0]


def test_hardening_keeps_explicit_choices_and_is_idempotent():
    pod = gpu_pod()
    pod["containers"][0]["env"].append({"name": "HOME", "value": "/data/home"})
    pod["containers"][0]["securityContext"] = {"readOnlyRootFilesystem": False}
    once = harden_pod_spec(pod)
    assert harden_pod_spec(once) == once
    c = once["containers"][0]
    assert c["securityContext"]["readOnlyRootFilesystem"] is False
    assert [e["value"] for e in c["env"] if e["name"] == "HOME"] == ["/data/home"]


def test_efa_pods_run_as_root_without_a_pod_uid():
    spec = harden_pod_spec(gpu_pod(), efa=True)
    assert_valid(job(spec))
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert spec["containers"][0]["securityContext"]["runAsUser"] == 0


def test_a_stdlib_pod_without_mounts_gets_only_scratch():
    spec = harden_pod_spec({"restartPolicy": "OnFailure",
                            "containers": [{"name": "gate", "image": "python:3.12.8-slim-bookworm"}]})
    assert_valid(job(spec))
    assert [v["name"] for v in spec["volumes"]] == ["eksbench-home", "eksbench-tmp"]
    assert "automountServiceAccountToken" not in spec  # the gate needs its token: never touched here


def test_token_is_kept_out_only_when_asked():
    assert harden_pod_spec(gpu_pod(), automount_token=False)["automountServiceAccountToken"] is False
    assert "automountServiceAccountToken" not in harden_pod_spec(gpu_pod())


def test_getpass_finds_a_user_name_without_a_passwd_entry():
    env = {e["name"]: e["value"] for e in harden_pod_spec(gpu_pod())["containers"][0]["env"]}
    assert env["USER"] == env["LOGNAME"] == "eksbench" and env["HOME"] == HOME_DIR


def test_volume_owner_init_container_hands_directories_to_the_pod_user():
    from infra.access.pod_security import volume_owner_init_container

    init = volume_owner_init_container(image="python:3.11.11-slim-bookworm", volume="shared", mount_path="/data",
                                       paths=["datasets", "/data/results/run-001"])
    assert init["command"][-1] == ("mkdir -p /data/datasets /data/results/run-001 && "
                                   f"chown {RUN_AS_USER}:{RUN_AS_USER} /data/datasets /data/results/run-001")
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    pod = harden_pod_spec({**gpu_pod(), "initContainers": [init]})
    assert pod["initContainers"][0]["securityContext"]["runAsUser"] == 0  # its explicit choice wins
    assert_valid(job(pod))
    with pytest.raises(ValueError):
        volume_owner_init_container(image="x:1", volume="shared", mount_path="/data", paths=["/etc"])
