"""Manifest builders: pure unit tests, every object checked against the pinned Kubernetes schema."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.config.model import Experiment, GpuNodeGroup
from core.contract import summary_fields as F
from core.contract.results_location import ResultsLocation
from infra.environment import (
    GPU_NODE_LABEL_KEY,
    GPU_TAINT,
    SYSTEM_NODE_LABEL,
    Environment,
)
from tests.support.k8s_schema import assert_valid
from tests.support.pod_placement import place
from workloads.code_manifests import code_config_map_manifest
from workloads.framework_support import check_experiment
from workloads.gate_manifests import completion_waits
from workloads.job_manifests import experiment_manifests, suite_budget_minutes, training_job_manifest
from workloads.launch.common import CODE_ROOT
from workloads.pod_manifests import COMPILE_CACHE_DIR, COMPILE_CACHE_GIB
from workloads.train.harness.what_ran import JOB_ENV

ENV = Environment(namespace="eksbench", service_account="eksbench-trainer", claim_name="eksbench-shared",
                  mount_path="/data", datasets_dir="/data/datasets", results_dir="/data/results/run-001",
                  etcd_endpoint="etcd.eksbench.svc.cluster.local:2379",
                  results=ResultsLocation(None, "eksbench", "dev", "run-001"),
                  datasets_prefix_uri=None)

P3 = GpuNodeGroup(name="p3", instance_type="p3.16xlarge", max_size=2, desired_size=2)
P4D = GpuNodeGroup(name="p4d", instance_type="p4d.24xlarge", efa=True, max_size=4)
RESNET = Experiment(name="resnet50-synthetic", max_nodes=2, min_nodes=2, gpus_per_node=8, batch_size=256,
                    steps=500, timeout_minutes=60)
CIFAR = Experiment(name="cifar10-elastic", workload="cifar10", dataset="cifar10", min_nodes=1, max_nodes=2,
                   gpus_per_node=1, epochs=20, evaluate=True, timeout_minutes=90)
CODE = code_config_map_manifest({"workloads/__init__.py": "", "workloads/train/harness/launch.py": "print('hi')\n",
                                   "core/x.py": "y = 1\n"}, namespace="eksbench")


def build(e=RESNET, group=P3, **kw):
    return experiment_manifests(e, env=ENV, node_group=group, bucket="results-bkt", run_id="run-001",
                                  code_config_map=CODE, region="us-west-2", **kw)


def pod(job):
    return job["spec"]["template"]["spec"]


def main_container(job):
    return pod(job)["containers"][0]


def env_of(job):
    return {v["name"]: v.get("value", v.get("valueFrom")) for v in main_container(job)["env"]}


FRAMEWORKS = [
    RESNET,
    CIFAR,
    replace(RESNET, rdzv_backend="c10d"),
    replace(RESNET, framework="tensorflow", image="tensorflow/tensorflow:2.17.0-gpu"),
    replace(RESNET, framework="horovod", image="horovod/horovod:0.28.1"),
    replace(RESNET, framework="paddle", image="paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6", pservers=2),
]


@pytest.mark.parametrize("e", FRAMEWORKS, ids=lambda e: f"{e.framework}-{e.rdzv_backend}-{e.name}")
@pytest.mark.parametrize("group", [P3, P4D], ids=["p3", "p4d-efa"])
def test_every_manifest_is_schema_valid(e, group):
    objs = build(e, group, after=[("prev-run-001", None)], after_minutes=120)
    assert check_experiment(e) == []
    for obj in list(objs.values()) + [CODE]:
        assert_valid(obj)


def test_indexed_job_and_headless_service_give_pods_stable_dns():
    objs = build()
    job, svc = objs["job"], objs["svc"]
    assert job["metadata"]["name"] == "resnet50-synthetic-run-001"
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 2
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert pod(job)["subdomain"] == svc["metadata"]["name"]
    selector = svc["spec"]["selector"]
    assert selector.items() <= job["spec"]["template"]["metadata"]["labels"].items()
    assert "successPolicy" not in job["spec"]  # fixed size: every index must succeed


def test_gpu_pods_request_gpus_tolerate_the_taint_and_select_their_group():
    job = build()["job"]
    res = main_container(job)["resources"]
    assert res["limits"]["nvidia.com/gpu"] == res["requests"]["nvidia.com/gpu"] == "8"
    tol = pod(job)["tolerations"]
    assert any(t["key"] == GPU_TAINT["key"] and t["value"] == GPU_TAINT["value"] and t["effect"] == GPU_TAINT["effect"]
               for t in tol)
    assert pod(job)["nodeSelector"][GPU_NODE_LABEL_KEY] == "p3"
    assert pod(job)["nodeSelector"]["node.kubernetes.io/instance-type"] == "p3.16xlarge"
    assert "vpc.amazonaws.com/efa" not in res["limits"]


def test_pod_basics_storage_shm_identity_and_limits():
    job = build()["job"]
    spec = pod(job)
    assert spec["restartPolicy"] == "Never" and spec["serviceAccountName"] == ENV.service_account
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["shared"]["persistentVolumeClaim"]["claimName"] == ENV.claim_name
    assert vols["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "244Gi"}  # half of 488 GiB
    mounts = {v["name"]: v["mountPath"] for v in main_container(job)["volumeMounts"]}
    assert mounts == {"shared": "/data", "dshm": "/dev/shm", "code": "/opt/eksbench",
                      # writable HOME and /tmp for a non-root user on a read-only root (infra/access/pod_security.py)
                      "eksbench-home": "/home/eksbench", "eksbench-tmp": "/tmp"}
    assert job["spec"]["activeDeadlineSeconds"] == 3600 and job["spec"]["backoffLimit"] == 3
    assert job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert "ttlSecondsAfterFinished" not in job["spec"]
    env = env_of(job)
    assert env["EKSBENCH_RUN_ID"] == "run-001" and env["EKSBENCH_IMAGE"] == RESNET.image
    assert env["PYTHONPATH"] == "/opt/eksbench"
    assert not any("AWS_ACCESS_KEY" in k or "AWS_SECRET" in k for k in env)
    script = main_container(job)["command"][2]
    assert "--results-uri s3://results-bkt/eksbench/dev/run-001/resnet50-synthetic/" in script
    assert "torchrun --nnodes=2 --nproc_per_node=8" in script


def test_shm_scales_with_the_pods_share_of_the_node():
    job = build(CIFAR)["job"]
    assert {v["name"]: v for v in pod(job)["volumes"]}["dshm"]["emptyDir"]["sizeLimit"] == "30Gi"  # 488/8/2


def test_efa_groups_get_devices_and_libfabric_env():
    job = build(group=P4D)["job"]
    assert main_container(job)["resources"]["limits"]["vpc.amazonaws.com/efa"] == "4"
    env = env_of(job)
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"


IMAGENET = replace(RESNET, name="resnet50-imagenet", dataset="imagenet")


@pytest.mark.parametrize("e,off", [(replace(IMAGENET, input_path="pillow"), True),
                                   (replace(IMAGENET, input_path="nvjpeg"), True),
                                   (replace(IMAGENET, workload="maskrcnn", dataset="coco2017", batch_size=2), True),
                                   (IMAGENET, False),  # DALI: its readers start by spawn
                                   (RESNET, False), (CIFAR, False)],
                         ids=["pillow", "nvjpeg", "maskrcnn-coco", "dali", "synthetic", "cifar-in-memory"])
def test_efa_pods_whose_loader_forks_workers_keep_libfabric_off_huge_pages(e, off):
    """A fork after NCCL mapped libfabric's huge-page buffers can fail with ENOMEM (aws-ofi-nccl#179): pods whose
    trainer forks DataLoader workers set FI_EFA_USE_HUGE_PAGE=0; the others keep huge pages."""
    env = env_of(build(e, group=P4D)["job"])
    assert (env.get("FI_EFA_USE_HUGE_PAGE") == "0") is off
    assert "FI_EFA_USE_HUGE_PAGE" not in env_of(build(e, group=P3)["job"])  # no EFA, nothing to say


def test_elastic_run_succeeds_once_pod_zero_succeeded():
    """Pod 0 writes and uploads the summary: the Job must not end (removing its lingering pods)
    because the other pods succeeded first."""
    job = build(CIFAR)["job"]
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 2
    assert job["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0", "succeededCount": 1}]}
    assert "--nnodes=1:2" in main_container(job)["command"][2]
    assert_valid(job)


def test_compiled_runs_keep_their_inductor_cache_out_of_the_small_tmp():
    job = build(replace(RESNET, compile=True, compile_mode="max-autotune"))["job"]
    vols = {v["name"]: v for v in pod(job)["volumes"]}
    mounts = {v["name"]: v["mountPath"] for v in main_container(job)["volumeMounts"]}
    assert vols["compile-cache"]["emptyDir"] == {"sizeLimit": f"{COMPILE_CACHE_GIB}Gi"}
    assert env_of(job)["TORCHINDUCTOR_CACHE_DIR"] == mounts["compile-cache"] == COMPILE_CACHE_DIR
    assert not COMPILE_CACHE_DIR.startswith("/tmp/") and COMPILE_CACHE_GIB > 2
    assert vols["eksbench-tmp"]["emptyDir"] == {"sizeLimit": "2Gi"}  # what the cache used to share
    assert "compile-cache" not in {v["name"] for v in pod(build()["job"])["volumes"]}
    assert_valid(job)


def test_code_config_map_is_immutable_content_named_and_keeps_subfolders():
    assert CODE["immutable"] is True
    assert CODE["data"]["core--x.py"] == "y = 1\n"
    other = code_config_map_manifest({"workloads/train/harness/launch.py": "print('bye')\n"}, namespace="eksbench")
    assert other["metadata"]["name"] != CODE["metadata"]["name"]
    items = {i["key"]: i["path"] for i in pod(build()["job"])["volumes"][2]["configMap"]["items"]}
    assert items["core--x.py"] == "core/x.py" and items["workloads--train--harness--launch.py"] == "workloads/train/harness/launch.py"
    with pytest.raises(ValueError, match="1 MiB"):
        code_config_map_manifest({"big.py": "x" * (1024 * 1024)}, namespace="eksbench")


def test_evaluation_job_is_suspended_until_its_gate_sees_training_complete():
    objs = build(CIFAR)
    assert list(objs) == ["svc", "job", "eval", "gate-sa", "gate-role", "gate-binding", "eval-gate"]
    ev = objs["eval"]
    assert ev["spec"]["suspend"] is True and ev["spec"]["completions"] == 1
    assert main_container(ev)["resources"]["limits"]["nvidia.com/gpu"] == "1"
    script = main_container(ev)["command"][2]
    assert "workloads.train.pytorch.evaluate --workload cifar10" in script
    assert "/data/results/run-001/cifar10-elastic/checkpoints/latest.pt" in script
    assert "s3://results-bkt/eksbench/dev/run-001/cifar10-elastic/eval/" in script
    gate = objs["eval-gate"]
    spec = env_of(gate)["EKSBENCH_GATE"]
    assert '"resume": ["cifar10-elastic-run-001-eval"]' in spec
    assert '"require_success": ["cifar10-elastic-run-001"]' in spec
    assert pod(gate)["nodeSelector"] == SYSTEM_NODE_LABEL and "nvidia.com/gpu" not in str(pod(gate))
    assert pod(gate)["serviceAccountName"] == objs["gate-sa"]["metadata"]["name"]
    assert objs["job"]["spec"]["suspend"] is False  # nothing before it


def test_gate_runs_the_shipped_gate_module_from_the_code_config_map():
    gate = build(CIFAR)["eval-gate"]
    assert main_container(gate)["command"] == ["python3", "-m", "workloads.train.control.gate"]
    assert env_of(gate)["PYTHONPATH"] == CODE_ROOT
    assert main_container(gate)["volumeMounts"][0] == {"name": "code", "mountPath": CODE_ROOT, "readOnly": True}
    assert [m["mountPath"] for m in main_container(gate)["volumeMounts"][1:]] == ["/home/eksbench", "/tmp"]
    assert pod(gate)["volumes"][0] == next(v for v in pod(build(CIFAR)["job"])["volumes"] if v["name"] == "code")


def test_evaluation_is_replaced_when_its_training_is():
    a = build(CIFAR)["eval"]["spec"]["template"]["metadata"]["annotations"]["eksbench.io/training"]
    b = build(replace(CIFAR, batch_size=32))["eval"]["spec"]["template"]["metadata"]["annotations"]
    assert a != b["eksbench.io/training"]


def test_a_successor_is_suspended_and_resumed_by_its_gate():
    waits = completion_waits(CIFAR, run_id="run-001")
    objs = build(after=waits, after_minutes=suite_budget_minutes(CIFAR))
    assert objs["job"]["spec"]["suspend"] is True
    spec = env_of(objs["gate"])["EKSBENCH_GATE"]
    assert '["cifar10-elastic-run-001-eval", "cifar10-elastic-run-001"]' in spec
    assert '"resume": ["resnet50-synthetic-run-001"]' in spec
    assert objs["gate"]["spec"]["activeDeadlineSeconds"] == (90 + 30 + 60 + 60) * 60
    rules = objs["gate-role"]["rules"][0]
    assert rules["resources"] == ["jobs"] and set(rules["verbs"]) == {"get", "patch"}
    assert rules["resourceNames"] == ["cifar10-elastic-run-001", "cifar10-elastic-run-001-eval",
                                      "resnet50-synthetic-run-001"]


def test_gate_is_replaced_with_the_jobs_it_resumes():
    a = build(after=[("p", None)])["gate"]
    b = build(replace(RESNET, batch_size=128), after=[("p", None)])["gate"]
    key = "eksbench.io/gated-jobs"
    annotations = [g["spec"]["template"]["metadata"]["annotations"] for g in (a, b)]
    assert annotations[0][key] != annotations[1][key]


def test_paddle_has_a_gpu_free_pserver_job_on_the_same_service():
    e = FRAMEWORKS[-1]
    objs = build(e)
    ps, tr = objs["pserver"], objs["job"]
    assert ps["metadata"]["name"] == tr["metadata"]["name"] + "-ps" and ps["spec"]["completions"] == 2
    assert "nvidia.com/gpu" not in main_container(ps)["resources"].get("limits", {})
    assert pod(ps)["subdomain"] == pod(tr)["subdomain"]
    assert env_of(ps)["TRAINING_ROLE"] == "PSERVER" and env_of(tr)["TRAINING_ROLE"] == "TRAINER"
    script = main_container(ps)["command"][2]
    assert 'export POD_IP="resnet50-synthetic-run-001-ps-${JOB_COMPLETION_INDEX}.' in script
    assert 'SERVER_ENDPOINT="resnet50-synthetic-run-001-ps-${JOB_COMPLETION_INDEX}.' in script
    # Paddle 2.x fleet's names beside the Fluid-era ones; trainers' POD_IP from the downward API
    assert env_of(tr)["PADDLE_TRAINERS_NUM"] == env_of(tr)["TRAINERS"]
    assert env_of(tr)["PADDLE_PSERVERS_IP_PORT_LIST"] == env_of(tr)["PSERVER_HOSTS"]
    assert env_of(tr)["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert 'PADDLE_TRAINER_ID="${JOB_COMPLETION_INDEX}"' in main_container(tr)["command"][2]


def _running_pods(objs: dict) -> list[tuple[str, dict, dict]]:
    """Every pod of the experiment's Jobs that run at once (training, and paddle's pservers)."""
    jobs = [j for k, j in objs.items() if k in ("job", "pserver")]
    return [(f"{j['metadata']['name']}-{i}", j["spec"]["template"]["metadata"]["labels"], pod(j))
            for j in jobs for i in range(j["spec"]["completions"])]


@pytest.mark.parametrize("e", FRAMEWORKS, ids=lambda e: f"{e.framework}-{e.rdzv_backend}-{e.name}")
def test_one_experiment_never_puts_two_trainers_on_one_node(e):
    """Pods asking for part of a node (cifar10-elastic: 1 GPU of 8) would otherwise share one, and a
    "2-node" run would talk over shared memory. Paddle's pservers may share a node with each other only."""
    nodes = place(_running_pods(build(e)))
    trainers = {n: node for n, node in nodes.items() if "-ps-" not in n}
    pservers = {n: node for n, node in nodes.items() if "-ps-" in n}
    assert len(set(trainers.values())) == len(trainers) == e.max_nodes, nodes
    assert not set(pservers.values()) & set(trainers.values()), nodes
    if pservers:
        assert len(set(pservers.values())) == 1, nodes  # nothing keeps pservers apart


def test_the_anti_affinity_keys_on_the_experiments_peer_label_per_node():
    term = pod(build(CIFAR)["job"])["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == [{"labelSelector": {"matchLabels": {"eksbench.io/peers": "cifar10-elastic-run-001"}},
                     "topologyKey": "kubernetes.io/hostname"}]
    other = replace(CIFAR, name="other")
    assert len(set(place(_running_pods(build(CIFAR)) + _running_pods(build(other)), count=2).values())) == 2


@pytest.mark.parametrize("e", FRAMEWORKS, ids=lambda e: f"{e.framework}-{e.rdzv_backend}-{e.name}")
def test_cluster_autoscaler_never_evicts_a_training_or_evaluation_pod(e):
    objs = build(e)
    for key in [k for k in ("job", "pserver", "eval") if k in objs]:
        annotations = objs[key]["spec"]["template"]["metadata"]["annotations"]
        assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false", key


def test_pods_carry_instance_type_nccl_debug_and_the_git_commit():
    e = FRAMEWORKS[0]
    job = training_job_manifest(e, env=ENV, node_group=P4D, bucket="b", run_id="run-001",
                                  code_config_map=CODE, git_commit="abc123")
    env = env_of(job)
    assert env["EKSBENCH_INSTANCE_TYPE"] == "p4d.24xlarge" and env["EKSBENCH_GIT_COMMIT"] == "abc123"
    assert env["NCCL_DEBUG"] == "INFO"  # its INIT lines name NET/OFI or NET/Socket for the summary
    placed = env_of(training_job_manifest(e, env=ENV, node_group=P4D, bucket="b", run_id="run-001",
                                            code_config_map=CODE, region="us-east-1"))
    assert placed[JOB_ENV[F.REGION]] == "us-east-1"  # what_ran.region: what prices the run (core.catalog.aws)
    script = main_container(job)["command"][2]
    assert "--rdzv_conf=join_timeout=300,last_call_timeout=5,keep_alive_interval=2,keep_alive_max_attempt=3" in script
    assert "--collective-timeout=300" in script and "--workers=8" in script  # 96 vCPUs / 8 GPUs -> 12 * 0.75 - 1


def test_manifests_are_deterministic():
    assert build(CIFAR) == build(CIFAR)


def test_every_pod_is_restricted_non_root_without_capabilities_or_token():
    """Training, evaluation and gate pods ran as root with no securityContext (issue: Ready for a real AWS account)."""
    for role, obj in build(CIFAR).items():
        if obj["kind"] != "Job":
            continue
        spec = pod(obj)
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10001
        for container in spec["containers"]:
            ctx = container["securityContext"]
            assert ctx["capabilities"]["drop"] == ["ALL"] and "add" not in ctx["capabilities"], role
            assert ctx["allowPrivilegeEscalation"] is False and ctx["readOnlyRootFilesystem"] is True, role
            assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}, role
        assert spec.get("automountServiceAccountToken", True) is role.endswith("gate"), role
        assert_valid(obj)


def test_efa_pods_keep_root_with_ipc_lock_only():
    job = build(RESNET, P4D)["job"]
    ctx = main_container(job)["securityContext"]
    assert ctx["runAsUser"] == 0 and ctx["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    assert "runAsUser" not in pod(job)["securityContext"]


def test_on_fsx_an_init_container_hands_the_results_folder_to_the_pods_user():
    fsx = replace(ENV, storage_kind="fsx")
    job = experiment_manifests(RESNET, env=fsx, node_group=P3, bucket="results-bkt", run_id="run-001",
                                 code_config_map=CODE, region="us-west-2")["job"]
    init = pod(job)["initContainers"][0]
    assert init["command"][-1].endswith("chown 10001:10001 /data/results/run-001/resnet50-synthetic")
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert "initContainers" not in pod(build(RESNET)["job"])  # EFS: the access point owns the volume
    assert_valid(job)


def test_a_run_the_gpu_default_compiles_gets_the_compile_cache_too():
    vols = {v["name"] for v in pod(build(replace(RESNET, steps=100_000))["job"])["volumes"]}
    assert "compile-cache" in vols
