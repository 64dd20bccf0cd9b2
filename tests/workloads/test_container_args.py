"""Jobs the plan cannot show here, as registration hands them to the API (``infra.container_text.kubelet_literal``,
which ``infra.k8s_objects.register`` applies to every manifest), then expanded as the kubelet expands them and
run in a shell: paddle's trainers and pservers (refused on the cluster, built all the same) get the stack
file's ``args`` exactly, and the control Jobs' instructions reach them unchanged."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.catalog.pins import PADDLE_IMAGE
from core.config.model import Experiment
from core.contract.names import ENV_AUTOSTOP, ENV_GATE
from core.contract.train_args import parse_train_args
from infra.container_text import kubelet_literal
from tests.support.pod_shell import launched_command, pod_containers, run_container
from tests.workloads.test_manifests import CODE, ENV, P3
from workloads import autostop_manifests as am
from workloads.gate_manifests import GATE_MODULE, gate_job_manifest
from workloads.job_manifests import experiment_manifests

HOSTILE = ["--lr=$(EKSBENCH_EXPERIMENT)", "--seed=$$5", "$", "$(", "'; rm -rf /", "`id`", "a\nb", "$(POD_IP)"]
PADDLE = replace(Experiment(name="pd"), framework="paddle", min_nodes=2, max_nodes=2, pservers=2, image=PADDLE_IMAGE,
                 args=tuple(HOSTILE))
SPEC = json.dumps({"namespace": "eksbench", "note": "$(PYTHONPATH) $$ $"})


@pytest.mark.parametrize("role", ["job", "pserver"])
def test_paddle_trainers_and_pservers_get_the_stack_files_args(role, tmp_path):
    built = experiment_manifests(PADDLE, env=ENV, node_group=P3, bucket="results-bkt", run_id="run-001",
                                   code_config_map=CODE, region="us-west-2")
    (container,) = pod_containers(kubelet_literal(built[role]))
    env, calls = run_container(container, tmp_path, index=1)
    command = launched_command(calls)
    trainer = command[command.index("workloads.train.paddle") + 1:]
    assert trainer[-len(HOSTILE):] == HOSTILE, trainer
    parse_train_args(trainer[:-len(HOSTILE)])
    assert env["POD_IP"] == "10.0.0.7"


def test_the_gate_reads_its_instructions_unchanged(tmp_path):
    job = gate_job_manifest("g", namespace="eksbench", service_account="g", spec=SPEC, deadline_seconds=60,
                              label_set={}, fingerprint="f", code_config_map=CODE)
    (container,) = pod_containers(kubelet_literal(job))
    env, calls = run_container(container, tmp_path)
    assert env[ENV_GATE] == SPEC and calls == [["-m", GATE_MODULE]]


def test_the_autostop_controller_reads_its_instructions_unchanged(tmp_path):
    deployment = am.autostop_deployment_manifest(namespace="eksbench", spec=SPEC, code_config_map=CODE)
    (container,) = pod_containers(kubelet_literal(deployment))
    env, calls = run_container(container, tmp_path)
    assert env[ENV_AUTOSTOP] == SPEC and calls[-1] == ["-m", am.MODULE]
