"""Sweeps (core.config.sweep): a list of node counts or batch sizes becomes one experiment per value, with
predictable names, validated like any other; bad lists give one line naming the key, index and value."""

from __future__ import annotations

import copy

import pytest

from tests.program.test_config import GOOD, parse, problems


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
