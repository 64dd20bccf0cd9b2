"""Sweeps (core.config.sweep): a list of node counts or batch sizes becomes one experiment per value, with
predictable names, validated like any other; bad lists give one line naming the key, index and value. A sweep's
plan registers its runs in time linear in their number."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import rpc

from program.offline import evaluate_config
from program.recorded_inputs import plain, read_struct, recorded_inputs, write_struct
from program.stack_files import read_stack_yaml

from tests.program.test_config import GOOD, parse, problems

ROOT = Path(__file__).resolve().parents[2]
TODAY = "2026-12-07"
JOB = "kubernetes:batch/v1:Job"


def stack(*experiments, max_size=4, execution="sequential"):
    raw = copy.deepcopy(GOOD)
    raw["gpu_node_groups"][0]["max_size"] = max_size
    raw["execution"] = execution
    raw["experiments"] = list(experiments)
    return raw


def test_a_node_sweep_expands_into_one_experiment_per_value_named_by_it():
    cfg = parse(stack({"name": "resnet50", "nodes": [1, 2, 4], "precision": "fp32"}, {"name": "solo", "nodes": "1:2"}))
    assert [(e.name, e.min_nodes, e.max_nodes) for e in cfg.experiments] == [
        ("resnet50-n1", 1, 1), ("resnet50-n2", 2, 2), ("resnet50-n4", 4, 4), ("solo", 1, 2)]
    assert {e.precision for e in cfg.experiments[:3]} == {"fp32"}  # everything else is copied
    assert cfg.experiment_sources == (0, 0, 0, 1)
    assert [cfg.experiment_key(i) for i in range(4)] == ["experiments[0]"] * 3 + ["experiments[1]"]


def test_both_lists_give_the_product_nodes_first():
    cfg = parse(stack({"name": "rn", "nodes": [1, 2], "batch_size": [128, 256]}))
    assert [(e.name, e.max_nodes, e.batch_size) for e in cfg.experiments] == [
        ("rn-n1-b128", 1, 128), ("rn-n1-b256", 1, 256), ("rn-n2-b128", 2, 128), ("rn-n2-b256", 2, 256)]
    assert [e.name for e in parse(stack({"name": "rn", "batch_size": [64]})).experiments] == ["rn-b64"]


@pytest.mark.parametrize("entry, expected", [
    ({"name": "rn", "nodes": [1, "1:2"]},
     'experiments[0].nodes[1]="1:2": a sweep lists fixed node counts (whole numbers >= 1); an elastic "min:max" '
     'range cannot be swept, e.g. [1, 2, 4]'),
    ({"name": "rn", "nodes": [0]}, "experiments[0].nodes[0]=0: a sweep lists fixed node counts"),
    ({"name": "rn", "nodes": [1, True]}, "experiments[0].nodes[1]=true: a sweep lists fixed node counts"),
    ({"name": "rn", "nodes": [2, 2]}, "experiments[0].nodes[1]=2: is listed twice"),
    ({"name": "rn", "nodes": []}, "experiments[0].nodes=[]: a sweep must list at least one value"),
    ({"name": "rn", "nodes": list(range(1, 18))}, "a sweep lists at most 16 values"),
    ({"name": "rn", "batch_size": [128, 5000]},
     "experiments[0].batch_size[1]=5000: a sweep lists per-GPU batch sizes, whole numbers from 1 to 4096"),
    ({"name": "rn", "batch_size": list(range(1, 17)), "nodes": [1, 2, 3, 4, 5]},
     "the sweep makes 80 experiments; at most 64"),
    ({"name": "a-very-long-experiment-name-xx", "nodes": [1, 2]},
     'experiments[0].name="a-very-long-experiment-name-xx": the sweep names its experiments <name>-n<nodes>'),
])
def test_bad_sweeps_are_one_line_each_naming_key_index_and_value(entry, expected):
    got = problems(stack(entry))
    assert any(expected in p for p in got), got
    assert all("\n" not in p for p in got)


def test_a_generated_name_that_another_experiment_has_names_both():
    got = problems(stack({"name": "rn-n2"}, {"name": "rn", "nodes": [1, 2]}))
    assert got == ['experiments[1].name="rn": makes the experiment "rn-n2", and so does experiments[0]: names must be '
                   'unique; rename one, e.g. "rn-n2-2"']
    got = problems(stack({"name": "rn", "nodes": [1, 2]}, {"name": "rn", "nodes": [2, 4]}))
    assert got == ['experiments[1].name="rn": makes the experiment "rn-n2", and so does experiments[0] (the sweep of '
                   '"rn"): names must be unique; rename one, e.g. "rn-n2-2"']
    got = problems(stack({"name": "rn", "nodes": [2]}, {"name": "rn-n2"}))
    assert 'experiments[1].name="rn-n2": makes the experiment "rn-n2", and so does experiments[0] (the sweep of ' \
           '"rn")' in got[0]


def test_a_problem_shared_by_a_sweeps_experiments_is_said_once_under_its_entry():
    got = problems(stack({"name": "rn", "nodes": [1, 2, 4], "precision": "fp64"}))
    assert got == ['experiments[0].precision="fp64": must be one of fp32, amp-fp16, bf16, fp8, e.g. "fp32"']
    # meaning rules see single values and name the stack file's entry
    got = problems(stack({"name": "ok"}, {"name": "rn", "nodes": [1, 2, 8]}))
    assert got == ["experiments[1].nodes=8: needs 8 nodes but node group 'gpu' has max_size 4, e.g. 4"]


def test_a_scalar_nodes_value_that_is_not_a_count_says_lists_are_allowed():
    got = problems(stack({"name": "rn", "nodes": "many"}))
    assert got == ['experiments[0].nodes="many": must be a node count >= 1, "min:max" for an elastic run, or a list '
                   'of counts for a sweep, e.g. "2:4"']


# A sweep registers in time linear in its runs: no run's objects depend on another run's component, nor on a chain
# through every run before it (workloads/experiment_suite_component.py). Pulumi's SDK walks all that a resource depends
# on, transitively and recursively, each time a dependency is declared (pulumi/runtime/resource_cycle_breaker.py): the
# longest chain of dependencies is checked here, not the time (bench/benchmarks/plan_sweep.py times it).

def sweep(runs: int, *, evaluate: bool = False) -> dict:
    """The dev stack, sequential, with ``runs`` runs of its resnet50 experiment swept over node counts and batches."""
    config = read_stack_yaml("dev", ROOT)
    first = {k: v for k, v in config["eksbench:experiments"][0].items() if k != "name"}
    if evaluate:
        first = {**config["eksbench:experiments"][1], "nodes": 1}
    nodes = [1, 2] if runs > 16 else first["nodes"]  # a sweep lists 16 values at most
    batches = list(range(8, 8 * (runs // (2 if runs > 16 else 1) + 1), 8))
    config["eksbench:experiments"] = [{**first, "name": "s", "nodes": nodes, "batch_size": batches}]
    return config


def longest_chain(plan) -> int:
    """The most resources on one path of the plan's dependencies (a dependency on a component is recorded as one on
    each of its children, as Pulumi expands it)."""
    deps = {r["urn"]: r["dependencies"] for r in plan.resources}
    depth: dict[str, int] = {}
    for urn in deps:
        todo = [urn]
        while todo:  # iterative: an old chain of runs was deeper than Python's recursion
            top = todo[-1]
            waiting = [d for d in deps[top] if d in deps and d not in depth]
            if waiting:
                todo += waiting
                continue
            depth[top] = 1 + max((depth[d] for d in deps[top] if d in deps), default=0)
            todo.pop()
    return max(depth.values())


def test_the_longest_dependency_chain_does_not_grow_with_the_sweep():
    """Pulumi's SDK walks all that a resource depends on, recursively, for every dependency declared: a chain as long
    as the sweep made each walk cost the sweep's length squared, and the plan's time its cube."""
    small, large = (evaluate_config("dev", sweep(n), today=TODAY) for n in (8, 32))
    assert len([r for r in large.resources if r["type"] == JOB and r["name"].endswith("-job")]) == 32
    assert longest_chain(large) == longest_chain(small)


def by_name(plan) -> dict[str, dict]:
    return {r["name"]: r for r in plan.resources}


def test_a_runs_gate_waits_for_the_jobs_before_it_and_nothing_else_of_the_runs_before():
    plan = evaluate_config("dev", sweep(3, evaluate=True), today=TODAY)
    names = by_name(plan)
    urn = {n: r["urn"] for n, r in names.items()}
    runs = [f"experiments-s-b{b}" for b in (8, 16, 24)]
    code = urn["experiments-code"]
    for k, run in enumerate(runs):
        own = {n for n in names if n.startswith(run + "-")}
        for n in own:
            deps = set(names[n]["dependencies"])
            earlier = {urn[m] for m in names if any(m.startswith(r) for r in runs[:k])} | {urn[r] for r in runs[:k]}
            waits = deps & earlier
            if n == f"{run}-gate" and k:
                assert waits == {urn[f"{runs[k - 1]}-job"], urn[f"{runs[k - 1]}-eval"]}, n
            else:
                assert not waits, (n, waits)
            assert code in deps, n
    # The autostop controller's Deployment alone waits for every run's objects; its other objects need not.
    autostop = [r for r in plan.resources if r["parent"] == urn.get("autostop")]
    deployment = names["autostop-deployment"]
    assert {urn[f"{run}-job"] for run in runs} <= set(deployment["dependencies"])
    assert all(not set(r["dependencies"]) & {urn[f"{run}-job"] for run in runs} for r in autostop if r is not deployment)
    # Gated runs' Jobs are created suspended: nothing runs before the gate resumes them.
    for run in runs[1:]:
        assert names[f"{run}-job"]["inputs"]["spec"]["suspend"] is True


# The mock engine reads and writes plain values itself (program/recorded_inputs.py), and Pulumi's code the rest.
PLAIN = {"kind": "Job", "spec": {"parallelism": 2, "suspend": True, "args": ["a", "$$(X)"], "empty": {}, "list": []},
         "ratio": 0.5}
SECRET = {rpc._special_sig_key: rpc._special_secret_sig, "value": "s"}


def test_plain_values_read_and_write_as_pulumis_own_code_does():
    struct = asyncio.run(rpc.serialize_properties(PLAIN, {}))
    assert read_struct(struct) == (rpc.deserialize_properties(struct), True)
    assert recorded_inputs(struct) == plain(rpc.deserialize_properties(struct))
    assert write_struct(PLAIN) == struct


@pytest.mark.parametrize("special", [rpc.UNKNOWN, SECRET, {"deep": [1, SECRET]}, None])
def test_anything_else_is_read_by_pulumis_code(special):
    struct = struct_pb2.Struct()
    struct.update({**PLAIN, "special": special})
    read, plain_values = read_struct(struct)
    assert not plain_values and read == rpc.deserialize_properties(struct)
    assert recorded_inputs(struct) == plain(rpc.deserialize_properties(struct))


@pytest.mark.parametrize("special", [None, {"deep": [None]}, object(), {1: "a"}])
def test_anything_else_is_written_by_pulumis_code(special):
    assert write_struct({**PLAIN, "special": special}) is None
