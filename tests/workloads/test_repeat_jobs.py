"""repeats: N on the cluster: one Job per repeat, each gated on the one before, each writing its own
results folder; with execution: parallel the experiments still start together."""

from __future__ import annotations

from dataclasses import replace

from tests.support.k8s_schema import assert_valid
from tests.workloads.test_manifests import CIFAR, CODE, ENV, P3, RESNET, env_of, main_container
from workloads.experiment_suite_component import run_order
from workloads.gate_manifests import completion_waits
from workloads.job_manifests import experiment_manifests, suite_budget_minutes


def names(order):
    return [(p.label if p else None, r.label, minutes) for p, r, minutes in order]


def test_repeats_chain_one_after_another_in_both_executions():
    rep = replace(RESNET, repeats=3)
    budget = suite_budget_minutes(RESNET)
    seq = names(run_order((rep, CIFAR), "sequential"))
    assert seq == [(None, "resnet50-synthetic repeat 1/3", 0),
                   ("resnet50-synthetic repeat 1/3", "resnet50-synthetic repeat 2/3", budget),
                   ("resnet50-synthetic repeat 2/3", "resnet50-synthetic repeat 3/3", 2 * budget),
                   ("resnet50-synthetic repeat 3/3", "cifar10-elastic", 3 * budget)]
    par = names(run_order((rep, CIFAR), "parallel"))
    assert par[3] == (None, "cifar10-elastic", 0)  # experiments start together
    assert [p for p, _, _ in par[:3]] == [None, "resnet50-synthetic repeat 1/3", "resnet50-synthetic repeat 2/3"]
    assert names(run_order((RESNET, CIFAR), "parallel")) == [(None, "resnet50-synthetic", 0),
                                                            (None, "cifar10-elastic", 0)]


def test_each_repeat_is_its_own_job_writing_its_own_folder():
    order = run_order((replace(RESNET, repeats=2),), "sequential")
    built = [experiment_manifests(run, env=ENV, node_group=P3, bucket="results-bkt", run_id="run-001",
                                    code_config_map=CODE, region="us-west-2",
                                    after=completion_waits(prior, run_id="run-001") if prior else [],
                                    after_minutes=minutes) for prior, run, minutes in order]
    first, second = built
    assert first["job"]["metadata"]["name"] == "resnet50-synthetic-run-001-r1"
    assert second["job"]["metadata"]["name"] == "resnet50-synthetic-run-001-r2"
    assert first["job"]["metadata"]["labels"]["eksbench.io/repeat"] == "1"
    assert not first["job"]["spec"]["suspend"] and second["job"]["spec"]["suspend"]  # the gate resumes it
    assert '"resnet50-synthetic-run-001-r1"' in env_of(second["gate"])["EKSBENCH_GATE"]
    script = main_container(second["job"])["command"][-1]
    assert "s3://results-bkt/eksbench/dev/run-001/resnet50-synthetic/repeat_2/" in script
    assert "/data/results/run-001/resnet50-synthetic/repeat_2" in script
    assert env_of(second["job"])["EKSBENCH_EXPERIMENT"] == "resnet50-synthetic"  # the summary's experiment
    for objects in built:
        for obj in objects.values():
            assert_valid(obj)
