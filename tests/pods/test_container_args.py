"""A stack file's text reaches the pods' programs as written: what the plan registers, expanded as the kubelet
expands a container's env, command and args (``$(VAR)``, ``$$``; tests/support/kubelet_expansion.py), then
run in a shell, hands every framework's trainer the experiment's ``args`` and the staging program the
stack's ``datasets_uri`` unchanged."""

from __future__ import annotations

import copy
import re

import pytest

from core.contract.launch_command import ENTRY_MODULES
from core.contract.train_args import parse_train_args
from infra.container_text import pod_spec_path
from program.offline import evaluate_config
from tests.program.test_program import DEV, P5_FILLED
from tests.support.plan_manifests import kubernetes_objects
from tests.support.pod_shell import launched_command, pod_containers, run_container
from workloads.framework_support import IMAGE_EXAMPLES

HOSTILE = ["--lr=$(EKSBENCH_EXPERIMENT)", "--seed=$$5", "$", "$(", "'; rm -rf /", "`id`", "a\nb", "$(AWS_REGION)",
           "${HOME}", "$$$(PYTHONPATH)"]
DATASETS_URI = "s3://team-datasets/pre$(AWS_REGION)fix$$/"
BASE = dict(nodes=2, batch_size=8, precision="fp32", steps=10, timeout_minutes=30, args=HOSTILE)
HOROVOD_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/eksbench-horovod:1"
EXPERIMENTS = {  # name -> (experiment, framework); one of each framework the cluster runs, and Mask R-CNN
    "pt": dict(workload="resnet50", dataset="synthetic", **BASE),
    "ptc": dict(workload="cifar10", dataset="cifar10", rdzv_backend="c10d", evaluate=True, checkpoint_every=5,
                gpus_per_node=1, **BASE),
    "mrcnn": dict(workload="maskrcnn", dataset="synthetic", **BASE),
    "tf": dict(framework="tensorflow", image=IMAGE_EXAMPLES["tensorflow"], workload="resnet50", dataset="synthetic",
               **BASE),
    "hvd": dict(framework="horovod", image=HOROVOD_IMAGE, workload="resnet50", dataset="synthetic", **BASE),
}
# The strings of a container the kubelet expands: command, args, env values, exec probes' commands.
DOUBLED = re.compile(r"(?:[^$]|\$\$)*")


@pytest.fixture(scope="module")
def hostile():
    config = copy.deepcopy(DEV)
    config["eksbench:datasets_uri"] = DATASETS_URI
    config["eksbench:experiments"] = [{"name": n, **e} for n, e in EXPERIMENTS.items()]
    return dict(kubernetes_objects(evaluate_config("dev", config).resources))


@pytest.fixture(scope="module")
def hostile_fsx():
    config = copy.deepcopy(P5_FILLED)
    config["eksbench:experiments"] = [{**e, "args": [*e.get("args", []), *HOSTILE]}
                                      for e in config["eksbench:experiments"]]
    return dict(kubernetes_objects(evaluate_config("p5-fsx", config).resources))


def expanded_strings(container: dict):
    yield from container.get("command", [])
    yield from container.get("args", [])
    yield from (e["value"] for e in container.get("env", []) if "value" in e)
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        yield from ((container.get(probe) or {}).get("exec") or {}).get("command", [])


@pytest.mark.parametrize("plan", ["hostile", "hostile_fsx"])
def test_every_dollar_the_plan_gives_the_kubelet_is_doubled(plan, request):
    """Every pod of the plan (Jobs, the autostop Deployment, etcd, device plugins; init containers too):
    no ``$`` is left for the kubelet to read as ``$(VAR)`` or ``$$``."""
    pods = 0
    for name, manifest in request.getfixturevalue(plan).items():
        path = pod_spec_path(manifest["kind"])
        if path is None:
            continue
        spec = manifest
        for key in path:
            spec = spec[key]
        pods += 1
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            for s in expanded_strings(c):
                assert DOUBLED.fullmatch(s), (name, c["name"], s)
    assert pods >= 8


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_frameworks_trainer_gets_the_stack_files_args(hostile, name, tmp_path):
    """The training Job's pod 1, as the kubelet starts it: the trainer's own arguments are the contract's
    flags, then the experiment's ``args`` exactly as the stack file has them."""
    (container,) = pod_containers(hostile[f"experiments-{name}-job"])
    env, calls = run_container(container, tmp_path, index=1)
    assert env["EKSBENCH_EXPERIMENT"] == name
    command = launched_command(calls)
    entry = ENTRY_MODULES[EXPERIMENTS[name].get("framework", "pytorch")]
    trainer = command[command.index(entry) + 1:]
    assert trainer[-len(HOSTILE):] == HOSTILE, trainer
    parse_train_args(trainer[:-len(HOSTILE)])  # the rest is the contract's own flags


def test_the_evaluation_job_runs_the_evaluation_of_its_own_results(hostile, tmp_path):
    (container,) = pod_containers(hostile["experiments-ptc-eval"])
    _, calls = run_container(container, tmp_path)
    command = launched_command(calls)
    assert command[:3] == ["python3", "-m", "workloads.train.pytorch.evaluate"], command
    assert command[command.index("--checkpoint") + 1].startswith("/data/results/run-001/ptc/")


def test_the_staging_job_reads_the_stack_files_datasets_uri(hostile, tmp_path):
    (container,) = pod_containers(hostile["staging-cifar10"])
    _, calls = run_container(container, tmp_path)
    stage = calls[-1]
    assert stage[:2] == ["-m", "datasets.stage"], calls
    assert stage[stage.index("--source") + 1] == f"{DATASETS_URI}cifar10/"
