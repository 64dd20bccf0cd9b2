"""Launch contracts: pure unit tests; the shell preludes are run with sh and compared with Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from core.config.model import DEFAULT_IMAGE, Experiment
from core.contract.results_location import ResultsLocation
from infra.environment import Environment
from tests.workloads.conftest import ROOT
from workloads.framework_support import check_experiment
from workloads.gate_manifests import gate_spec
from workloads.launch.by_framework import launch_for
from workloads.launch.common import compiles, evaluation_argv, train_args_for, train_argv
from workloads.launch.paddle import PADDLE_PER_POD, paddle_env
from workloads.launch.pod_script import launcher_script
from workloads.launch.pytorch import C10D_PORT
from workloads.launch.tensorflow import tf_config, tf_workers
from workloads.object_names import MAX_BASE_NAME, base_name, service_name
from workloads.train.control import gate
from workloads.train.horovod.bootstrap import horovod_env

ENV = Environment(namespace="eksbench", service_account="eksbench-trainer", claim_name="eksbench-shared",
                  mount_path="/data", datasets_dir="/data/datasets", results_dir="/data/results/run-001",
                  etcd_endpoint="etcd.eksbench.svc.cluster.local:2379",
                  results=ResultsLocation(None, "eksbench", "dev", "run-001"),
                  datasets_prefix_uri=None)
E = Experiment(name="resnet50-synthetic", max_nodes=2, min_nodes=2, gpus_per_node=8, batch_size=256, steps=500)


def flag(argv, name):
    return next(a.split("=", 1)[1] for a in argv if a.startswith(name + "="))


def sh(script: str, **env: str) -> str:
    return subprocess.run(["sh", "-c", script], env={**os.environ, **env}, capture_output=True, text=True,
                          check=True).stdout


def test_torchrun_etcd_is_the_default():
    launch = launch_for(E, ENV, job="j", service="s", gpus=8)
    argv = launch.argv
    assert argv[0] == "torchrun"
    assert flag(argv, "--rdzv_backend") == "etcd-v2"
    assert flag(argv, "--rdzv_endpoint") == ENV.etcd_endpoint
    assert flag(argv, "--nnodes") == "2"
    assert flag(argv, "--nproc_per_node") == "8"
    assert flag(argv, "--max_restarts") == "3"
    assert flag(argv, "--rdzv_id") == "j"
    assert launch.port is None and "etcd" in launch.modules  # python-etcd: torch needs it for etcd-v2


def test_torchrun_c10d_uses_pod_zero_and_elastic_range():
    e = replace(E, rdzv_backend="c10d", min_nodes=1, max_nodes=4)
    launch = launch_for(e, ENV, job="j", service="s", gpus=8)
    assert flag(launch.argv, "--rdzv_endpoint") == "j-0.s.eksbench.svc.cluster.local:29400"
    assert flag(launch.argv, "--nnodes") == "1:4"
    assert launch.port == C10D_PORT and "etcd" not in launch.modules


# What the kubelet writes into an Indexed Job pod's /etc/hosts when the pod has a subdomain
# (kubernetes/kubernetes pkg/kubelet/kubelet_pods.go managedHostsFileContent).
KUBELET_HOSTS = ("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
                 "::1\tlocalhost ip6-localhost ip6-loopback\n10.0.0.7\tj-0.s.eksbench.svc.cluster.local\tj-0\n")


@pytest.mark.local_run
def test_pod_zero_hosts_the_c10d_store_before_dns_knows_it(tmp_path):
    """torch's own test (_matches_machine_hostname) in pod 0's situation: hostname j-0, the kubelet's
    /etc/hosts, and a DNS server that answers nothing (the headless Service's record is not there yet)."""
    import shutil

    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (util-linux) for a private hostname and /etc/hosts")
    e = replace(E, rdzv_backend="c10d", min_nodes=1, max_nodes=2)
    host = flag(launch_for(e, ENV, job="j", service="s", gpus=8).argv, "--rdzv_endpoint").rsplit(":", 1)[0]
    (tmp_path / "hosts").write_text(KUBELET_HOSTS)
    (tmp_path / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    probe = ("import socket, sys\nfrom torch.distributed.elastic.rendezvous.utils import _matches_machine_hostname\n"
             "print(socket.gethostname(), _matches_machine_hostname(sys.argv[1]))")
    inner = (f"hostname j-0 && mount --bind {tmp_path / 'hosts'} /etc/hosts && "
             f"mount --bind {tmp_path / 'resolv.conf'} /etc/resolv.conf && exec \"$0\" -c \"$1\" \"$2\"")
    run = subprocess.run(["unshare", "--uts", "--mount", "sh", "-c", inner, sys.executable, probe, host],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0 and "unshare" in run.stderr:
        pytest.skip(f"unshare refused: {run.stderr.strip()}")
    assert run.stdout.split() == ["j-0", "True"], (host, run.stdout, run.stderr)


def test_rdzv_id_is_stable_per_experiment_and_run():
    a = base_name(E, "run-001")
    assert a == base_name(E, "run-001") == "resnet50-synthetic-run-001"
    assert a != base_name(E, "run-002")


def test_long_names_are_shortened_stably_and_services_start_with_a_letter():
    e = replace(E, name="a" * 32)
    name = base_name(e, "r" * 20)
    assert len(name) <= MAX_BASE_NAME and name == base_name(e, "r" * 20)
    assert service_name(replace(E, name="3d-unet"), "run-1")[0].isalpha()


def test_train_args_follow_the_training_cli():
    argv = train_argv(replace(E, compile=True, channels_last=False, args=("--lr", "0.1")), ENV)
    assert argv[:2] == ("-m", "workloads.train.pytorch")
    assert flag(argv, "--data-dir") == "/data/datasets"  # the dataset is a folder under it
    assert flag(argv, "--results-dir") == "/data/results/run-001/resnet50-synthetic"
    assert flag(argv, "--image-size") == "224"
    assert "--no-channels-last" in argv and "--compile" in argv and argv[-2:] == ("--lr", "0.1")


@pytest.mark.parametrize("e", [E, replace(E, workload="cifar10", dataset="cifar10", epochs=20, precision="bf16"),
                               replace(E, workload="maskrcnn", dataset="coco2017", compile=True, channels_last=False)])
def test_cluster_argv_parses_back_to_the_experiments_train_args(e):
    from core.contract.train_args import TrainArgs, parse_train_args

    argv = train_argv(e, ENV)
    assert argv[:2] == ("-m", "workloads.train.pytorch")
    parsed = parse_train_args(argv[2:])
    assert parsed == train_args_for(e, ENV)
    # What the experiment does not set keeps the trainer's defaults, warm-up and log-every included.
    assert (parsed.warmup_steps, parsed.log_every) == (TrainArgs().warmup_steps, TrainArgs().log_every)
    assert flag(argv, "--warmup-steps") == str(TrainArgs().warmup_steps)


@pytest.mark.parametrize("index", [0, 1, 3])
def test_tf_config_prelude_matches_the_pure_function(index):
    e = replace(E, framework="tensorflow", max_nodes=4, min_nodes=4)
    launch = launch_for(e, ENV, job="tf", service="svc", gpus=8)
    out = sh(launch.prelude + '\nprintf %s "$TF_CONFIG"', JOB_COMPLETION_INDEX=str(index), **launch.env)
    workers = tf_workers("tf", "svc", 4)
    assert out == tf_config(workers, index)
    cfg = json.loads(out)
    assert cfg["task"] == {"type": "worker", "index": index}
    assert cfg["cluster"]["worker"][index] == f"tf-{index}.svc:2222"


def test_every_framework_tells_the_launcher_its_shape_and_the_trainers_arguments():
    """Nothing is read back from a command line: each framework's cluster launch carries a Launched,
    and the pod script passes it as the launcher's own --nodes/--procs-per-node/--train-config."""
    from core.contract.train_args import parse_train_args

    e = replace(E, framework="tensorflow", max_nodes=4, min_nodes=4, args=("--batch-size=3",))
    launch = launch_for(e, ENV, job="tf", service="svc", gpus=8)
    assert (launch.launched.nodes, launch.launched.procs_per_node) == (4, 1)  # one worker process per pod
    assert launch.launched.train == parse_train_args(launch.argv[3:]) and launch.launched.train.batch_size == 3
    hvd = launch_for(replace(e, framework="horovod"), ENV, job="hv", service="svc", gpus=8)
    assert (hvd.launched.nodes, hvd.launched.procs_per_node) == (4, 8)  # the bootstrap starts a rank per GPU
    i = hvd.argv.index("workloads.train.horovod")
    assert hvd.launched.train == parse_train_args(hvd.argv[i + 1:]) and hvd.launched.train.batch_size == 3


def test_horovod_bootstrap_gives_each_process_the_pure_env(tmp_path):
    e = replace(E, framework="horovod", max_nodes=3, min_nodes=3)
    launch = launch_for(e, ENV, job="hv", service="svc", gpus=2)
    i = launch.argv.index("-m")
    assert launch.argv[:i + 3] == ("python3", "-m", "workloads.train.horovod.bootstrap", "python3")
    assert launch.argv[i + 3:i + 5] == ("-m", "workloads.train.horovod")
    dump = f"import json, os; json.dump(dict(os.environ), open('{tmp_path}/' + os.environ['HOROVOD_RANK'], 'w'))"
    # Pod 1 (not 0, which would import horovod to serve the rendezvous) with a command that dumps its env.
    subprocess.run([sys.executable, "-m", launch.argv[i + 1], sys.executable, "-c", dump], check=True, cwd=ROOT,
                   env={**os.environ, **launch.env, "JOB_COMPLETION_INDEX": "1", "PYTHONPATH": str(ROOT)})
    hosts = launch.env["EKSBENCH_HVD_HOSTS"].split(",")
    for local in range(2):
        seen = json.load(open(tmp_path / str(2 + local)))
        expected = horovod_env(hosts=hosts, node=1, local_rank=local, gpus=2)
        assert {k: seen[k] for k in expected} == expected
    assert expected["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "hv-0.svc" and expected["HOROVOD_SIZE"] == "6"


@pytest.mark.parametrize("role,index", [("PSERVER", 0), ("PSERVER", 1), ("TRAINER", 0), ("TRAINER", 2)])
def test_paddle_prelude_matches_the_pure_env_contract(role, index):
    e = replace(E, framework="paddle", max_nodes=3, min_nodes=3, pservers=2)
    launch = launch_for(e, ENV, job="pd", service="svc", gpus=8, role=role)
    keys = PADDLE_PER_POD
    out = sh(launch.prelude + '\nprintf "%s|%s|%s|%s" "${SERVER_ENDPOINT:-}" "${TRAINER_INDEX:-}" '
             '"${PADDLE_TRAINER_ID:-}" "${POD_IP:-}"',
             JOB_COMPLETION_INDEX=str(index), **launch.env)
    want = paddle_env(e, job="pd", service="svc", role=role, index=index)
    assert out == "|".join(want.get(k, "") for k in keys)
    assert {k: v for k, v in want.items() if k not in keys} == dict(launch.env)
    assert want["PSERVER_HOSTS"] == "pd-ps-0.svc:6170,pd-ps-1.svc:6170" == want["PSERVERS"]
    assert want["TRAINERS"] == "3" and want["TRAINING_ROLE"] == role and want["TASK_NAME"] == "pd"
    # Paddle 2.x fleet (PaddleCloudRoleMaker._ps_env) reads these names
    assert want["PADDLE_PSERVERS_IP_PORT_LIST"] == want["PSERVER_HOSTS"] and want["PADDLE_TRAINERS_NUM"] == "3"
    assert want["PADDLE_TRAINER_ENDPOINTS"] == "pd-0.svc:6170,pd-1.svc:6170,pd-2.svc:6170"
    if role == "PSERVER":  # it finds itself as POD_IP:PADDLE_PORT in the pserver list
        assert f'{want["POD_IP"]}:{want["PADDLE_PORT"]}' == want["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")[index]
    else:
        assert want["PADDLE_TRAINER_ID"] == str(index) == want["TRAINER_INDEX"]


def test_launcher_script_wraps_the_command_and_forwards_sigterm():
    script = launcher_script(("torchrun", "-m", "x"), results_dir="/data/r", results_uri="s3://b/p/",
                               experiment="e", modules=("etcd", "boto3"))
    assert "python3 -m workloads.train.harness.launch --results-dir /data/r --results-uri s3://b/p/ --experiment e -- " \
           "torchrun -m x &" in script
    assert "python-etcd==0.4.5" in script and 'import etcd, boto3' in script
    assert "trap 'kill -TERM $child" in script


def test_launcher_script_runs_under_sh(tmp_path):
    script = launcher_script(("true",), results_dir=str(tmp_path / "r"), results_uri="s3://b/p/", experiment="e",
                               modules=())
    # No workloads.train.harness.launch here: the script must still parse, create the dir and report the exit code.
    rc = subprocess.run(["sh", "-n", "-c", script]).returncode
    assert rc == 0


@pytest.mark.parametrize("changes,needle", [
    (dict(framework="tensorflow", workload="maskrcnn", dataset="coco2017", image="tensorflow/tensorflow:2.17.0-gpu"),
     'workload "maskrcnn"'),
    (dict(framework="horovod", min_nodes=1, max_nodes=2), "elastic runs need"),
    (dict(framework="paddle"), "needs an image"),
    (dict(evaluate=True, workload="resnet50"), "evaluate=true"),
    (dict(evaluate=True, workload="cifar10", dataset="cifar10", checkpoint_every=0, checkpoint_minutes=0),
     "checkpoint_minutes=0 keeps none"),
    (dict(framework="tensorflow", compile=True, image="tensorflow/tensorflow:2.17.0-gpu"), "compile=true"),
    (dict(dataset="coco2017"), 'dataset="coco2017"'),
    (dict(workload="cifar10", dataset="synthetic"), 'workload "cifar10" trains on cifar10'),
    (dict(workload="maskrcnn", dataset="imagenet"), 'dataset="imagenet"'),
])
def test_check_experiment_rejects_unsupported_pairs(changes, needle):
    problems = check_experiment(replace(E, **changes))
    assert any(needle in p for p in problems), problems


def test_check_experiment_accepts_the_dev_experiments():
    assert check_experiment(E) == []
    assert check_experiment(replace(E, workload="cifar10", dataset="cifar10", min_nodes=1, evaluate=True)) == []
    assert check_experiment(replace(E, framework="horovod", image="horovod/horovod:0.28.1")) == []
    assert "/pytorch-training:" in DEFAULT_IMAGE and DEFAULT_IMAGE.endswith("-ec2")  # the AWS DLC


def _gate(spec, states):
    resumed, sleeps = [], []
    seq = iter(states)
    current = {}

    def state(name):
        return current[name]

    def sleep(s):
        sleeps.append(s)
        current.update(next(seq))

    current.update(next(seq))
    started = gate.run(json.loads(spec), state, resumed.append, sleep)
    return started, resumed, len(sleeps)


def test_gate_resumes_after_the_waited_job_completes():
    spec = gate_spec(namespace="ns", wait=[("a", None)], resume=["b", "b-ps"])
    started, resumed, sleeps = _gate(spec, [{"a": "Running"}, {"a": "Running"}, {"a": "Complete"}])
    assert resumed == ["b", "b-ps"] == started and sleeps == 2


def test_gate_does_not_evaluate_a_failed_training():
    spec = gate_spec(namespace="ns", wait=[("t", None)], resume=["t-eval"], require_success=["t"])
    assert _gate(spec, [{"t": "Failed"}])[1] == []


def test_gate_treats_a_never_started_evaluation_as_done():
    spec = gate_spec(namespace="ns", wait=[("t", None), ("t-eval", "t")], resume=["next"])
    assert _gate(spec, [{"t": "Failed", "t-eval": "Running"}])[1] == ["next"]
    assert _gate(spec, [{"t": "Complete", "t-eval": "Running"}, {"t": "Complete", "t-eval": "Complete"}])[2] == 1


def test_train_args_parse_with_the_training_scripts_own_parser():
    from core.contract.train_args import parse_train_args

    e = replace(E, workload="cifar10", dataset="cifar10", epochs=20, compile=True, precision="bf16")
    parsed = parse_train_args(train_argv(e, ENV)[2:])
    assert (parsed.workload, parsed.epochs, parsed.compile, parsed.precision) == ("cifar10", 20, True, "bf16")
    assert parsed.data_dir == ENV.datasets_dir and parsed.results_dir == ENV.experiment_results_dir(e)


def test_eval_args_parse_with_the_evaluation_scripts_own_parser():
    from workloads.train.pytorch import evaluate

    e = replace(E, workload="cifar10", dataset="cifar10", evaluate=True)
    argv = evaluation_argv(e.workload, results_dir=ENV.experiment_results_dir(e), data_dir=ENV.datasets_dir)
    assert argv[:2] == ("-m", "workloads.train.pytorch.evaluate")
    ev = evaluate.build_parser().parse_args(list(argv[2:]))
    assert ev.checkpoint == f"{ENV.experiment_results_dir(e)}/checkpoints/latest.pt"
    assert ev.results_dir == f"{ENV.experiment_results_dir(e)}/eval"


@pytest.mark.local_run
def test_launcher_script_keeps_the_exit_code_and_forwards_sigterm(tmp_path):
    """With the real workloads.train.harness.launch: summary.json is written on failure and on SIGTERM."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": os.getcwd(), "AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "y", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1"}
    env.pop("JOB_COMPLETION_INDEX", None)
    script = launcher_script(("sh", "-c", "exit 3"), results_dir=str(tmp_path / "a"), results_uri="s3://bkt/p/",
                               experiment="e", modules=())
    assert subprocess.run(["sh", "-c", script], env=env, capture_output=True, timeout=120).returncode == 3
    assert (tmp_path / "a" / "summary.json").is_file()
    loop = "trap 'exit 7' TERM; while :; do sleep 0.1; done"
    script = launcher_script(("sh", "-c", loop), results_dir=str(tmp_path / "b"), results_uri="s3://bkt/p/",
                               experiment="e", modules=())
    proc = subprocess.Popen(["sh", "-c", script], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)  # what the kubelet sends at activeDeadlineSeconds or eviction
    assert proc.wait(timeout=120) == 7
    assert (tmp_path / "b" / "summary.json").is_file()


def test_gate_reads_job_conditions_and_treats_a_missing_job_as_gone(monkeypatch):
    import io
    import urllib.error

    jobs = {"done": {"status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                               {"type": "Complete", "status": "True"}]}},
            "failed": {"status": {"conditions": [{"type": "Failed", "status": "True"}]}},
            "suspended": {"status": {"conditions": [{"type": "Suspended", "status": "True"}]}},
            "new": {}}

    def call(spec, name, body=None):
        if name not in jobs:
            raise urllib.error.HTTPError(name, 404, "not found", {}, io.BytesIO())
        return jobs[name]

    monkeypatch.setattr(gate, "call", call)
    state = gate.job_state
    assert [state({}, n) for n in ("done", "failed", "suspended", "new", "deleted")] == \
        ["Complete", "Failed", "Running", "Running", "Gone"]


def test_gate_main_reads_its_spec_from_the_env_and_patches_suspend_off(monkeypatch):
    calls = []

    def call(spec, name, body=None):
        calls.append((spec["namespace"], name, body))
        return {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}

    monkeypatch.setattr(gate, "call", call)
    monkeypatch.setenv("EKSBENCH_GATE", gate_spec(namespace="ns", wait=[("a", None)], resume=["b"]))
    gate.main()
    assert calls == [("ns", "a", None), ("ns", "b", {"spec": {"suspend": False}})]


def test_the_clusters_compile_is_the_stack_files_else_the_gpu_defaults_rule():
    """Unset, compile is the rule's (core.config.gpu_defaults): the dev stack's 500 steps stay eager, a run long
    enough to repay the compile time compiles; an explicit false wins over the rule."""
    long = replace(E, steps=100_000)
    assert (compiles(E), compiles(long), compiles(replace(long, compile=False))) == (False, True, False)
    assert "--compile" not in train_argv(E, ENV) and "--compile" in train_argv(long, ENV)
    assert train_args_for(long, ENV).compile is True


def test_dali_is_installed_in_the_pods_that_decode_with_it_for_their_images_cuda():
    from core.catalog import pins

    imagenet = replace(E, dataset="imagenet")
    cu126 = pins.training_image("us-west-2", pins.DLC_TAG_CU126)  # V100 groups (p3)
    for e, wheel in ((imagenet, "nvidia-dali-cuda130==2.4.0"), (replace(imagenet, image=cu126),
                                                               "nvidia-dali-cuda120==2.4.0"),
                     (replace(imagenet, framework="horovod", image="horovod/horovod:0.28.1"),
                      "nvidia-dali-cuda130==2.4.0")):
        launch = launch_for(e, ENV, job="j", service="s", gpus=8)
        assert "--input-path=dali" in launch.argv and pins.DALI_MODULE in launch.modules
        script = launcher_script(launch.argv, results_dir="/r", results_uri="s3://b/p/", experiment="e",
                                   modules=launch.modules, pins=launch.pins)
        assert 'python3 -c "import nvidia.dali"' in script and f"pip install --no-cache-dir --quiet {wheel}" in script
    for e in (E, replace(imagenet, input_path="pillow")):  # synthetic data; Pillow asked for
        launch = launch_for(e, ENV, job="j", service="s", gpus=8)
        assert pins.DALI_MODULE not in launch.modules and "--input-path=dali" not in launch.argv


def test_every_training_pod_installs_nvml_where_its_image_lacks_it():
    """The launcher samples the GPUs through pynvml (workloads.train.harness.telemetry); an image without it gave a
    run no GPU telemetry at all. The script installs the pinned wheel only where the import fails."""
    from core.catalog import pins

    for e, role in ((E, "TRAINER"), (replace(E, framework="tensorflow"), "TRAINER"),
                    (replace(E, framework="horovod", image="horovod/horovod:0.28.1"), "TRAINER"),
                    (replace(E, framework="paddle", pservers=1), "TRAINER")):
        launch = launch_for(e, ENV, job="j", service="s", gpus=8, role=role)
        assert "pynvml" in launch.modules, e.framework
        script = launcher_script(launch.argv, results_dir="/r", results_uri="s3://b/p/", experiment="e",
                                   modules=launch.modules, pins=launch.pins)
        assert 'python3 -c "import pynvml"' in script and f"pip install --no-cache-dir --quiet " \
            f"{pins.PIP_PINS['pynvml']}" in script, e.framework
