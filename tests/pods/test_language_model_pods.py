"""The llm stack's language-model Jobs, pod by pod, in the shapes the cluster runs them: 2 p5.48xlarge nodes of 8
GPUs under FSDP2, and tensor parallelism of 8 inside each node. What each pod's script hands torchrun and the
trainer (the kubelet's expansion and the Indexed Job's index applied: tests/support/pod_shell.py), and what every
rank of those 16 makes of it: its data-parallel rank, its share of the batch, its place in the device mesh.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from core.contract.train_args import parse_train_args
from program.offline import evaluate_config
from program.stack_files import ROOT
from tests.support.plan_manifests import kubernetes_objects
from tests.support.pod_shell import launched_command, pod_containers, run_container
from workloads.train.pytorch.language_model import LanguageModel

LLM = yaml.safe_load((ROOT / "Pulumi.llm.yaml").read_text())["config"]
TP8 = {"name": "llama8b-tp8", "workload": "llama3", "model_size": "8b", "nodes": 2, "batch_size": 1,
       "seq_len": 2048, "precision": "bf16", "tensor_parallel": 8, "activation_checkpoint": "full",
       "steps": 20, "fabric": "strict", "timeout_minutes": 60}


@pytest.fixture(scope="module")
def jobs():
    config = copy.deepcopy(LLM)
    config["eksbench:experiments"] = [*config["eksbench:experiments"], TP8]
    plan = evaluate_config("llm", config)
    return {name: m for name, m in kubernetes_objects(plan.resources) if m["kind"] == "Job"}


def flag(argv, name):
    return next(a.split("=", 1)[1] for a in argv if a.startswith(name + "="))


def pod_argv(job: dict, index: int, tmp_path) -> tuple[dict, list[str]]:
    """(the training container's env, what its launcher runs) in pod ``index`` of the Job."""
    container = next(c for c in pod_containers(job) if c["name"] == "main")
    env, calls = run_container(container, tmp_path, index=index)
    return env, launched_command(calls)


def ranks(argv: list[str]) -> list[LanguageModel]:
    """Every rank of the Job as the trainer builds its language-model parts (torchrun's RANK = node x 8 + local)."""
    args = parse_train_args(argv[argv.index("-m") + 2:])
    nodes, local = int(flag(argv, "--nnodes")), int(flag(argv, "--nproc_per_node"))
    return [LanguageModel(args, rank=r, world=nodes * local, local_world=local, precision=args.precision)
            for r in range(nodes * local)]


@pytest.mark.parametrize("index", [0, 1])
def test_two_nodes_of_eight_gpus_shard_the_8b_model_over_all_sixteen(jobs, index, tmp_path):
    env, argv = pod_argv(jobs["experiments-llama8b-bf16-n2-job"], index, tmp_path)
    assert argv[0] == "torchrun" and flag(argv, "--nnodes") == "2" and flag(argv, "--nproc_per_node") == "8"
    assert argv[argv.index("-m") + 1] == "workloads.train.pytorch"
    assert {"--workload=llama3", "--model-size=8b", "--seq-len=8192", "--precision=bf16", "--batch-size=1",
            "--compile"} <= set(argv)
    assert "--tensor-parallel=2" not in argv and not any(a.startswith("--tensor-parallel") for a in argv)
    assert env["FI_PROVIDER"] == "efa" and "FI_EFA_USE_HUGE_PAGE" not in env  # no forked loader workers
    everyone = ranks(argv)
    assert [lm.data_rank for lm in everyone] == list(range(16)) and {lm.data_batch for lm in everyone} == {1}
    assert {lm.data_world for lm in everyone} == {16} and {lm.seq_len for lm in everyone} == {8192}


@pytest.mark.parametrize("index", [0, 1])
def test_tensor_parallel_eight_keeps_each_group_inside_its_node(jobs, index, tmp_path):
    env, argv = pod_argv(jobs["experiments-llama8b-tp8-job"], index, tmp_path)
    assert flag(argv, "--nnodes") == "2" and flag(argv, "--nproc_per_node") == "8"
    assert {"--model-size=8b", "--tensor-parallel=8", "--activation-checkpoint=full", "--seq-len=2048"} <= set(argv)
    everyone = ranks(argv)
    # ranks 0-7 (node 0) are one TP group, 8-15 (node 1) the other: each group one data-parallel rank
    assert [lm.data_rank for lm in everyone] == [0] * 8 + [1] * 8
    assert {lm.data_batch for lm in everyone} == {8} and {lm.data_world for lm in everyone} == {2}


def test_the_plan_refuses_seventy_b_on_one_node_before_anything_is_built():
    from core.config.fields import ConfigError

    config = copy.deepcopy(LLM)
    config["eksbench:experiments"] = [{**TP8, "name": "too-big", "model_size": "70b", "nodes": 1,
                                       "tensor_parallel": 1, "activation_checkpoint": "none"}]
    with pytest.raises(ConfigError) as refused:
        evaluate_config("llm", config)
    assert "experiments[0]" in str(refused.value) and "70b" in str(refused.value).lower()


def test_a_float8_pod_installs_torchao_at_its_pin_and_a_bf16_pod_does_not(jobs, tmp_path):
    from core.catalog.pins import PIP_PINS

    for job, wanted in (("experiments-llama8b-fp8-n2-job", True), ("experiments-llama8b-bf16-n2-job", False)):
        container = next(c for c in pod_containers(jobs[job]) if c["name"] == "main")
        script = " ".join([*container.get("command", []), *container.get("args", [])])
        assert ("torchao" in script and PIP_PINS["torchao"] in script) is wanted, (job, script[-400:])
