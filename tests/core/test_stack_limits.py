"""A stack's experiments and runs have a total limit (core.config.sweep.too_many), counted from the sweep lists'
lengths and the repeats before anything is expanded: a 150 KB file that would make 102,400 experiments is one
line, at once."""

from __future__ import annotations

import copy
import time

import pytest

from core.config import sweep
from core.config.fields import ConfigError
from core.config.shape import parse_stack_config
from tests.core.examples import GOOD


def shape_problems(experiments: list) -> list[str]:
    raw = copy.deepcopy(GOOD)
    raw["experiments"] = experiments
    with pytest.raises(ConfigError) as e:
        parse_stack_config(raw, project="eksbench", stack="t", region="us-west-2")
    return e.value.problems


def parses(experiments: list):
    raw = copy.deepcopy(GOOD)
    raw["experiments"] = experiments
    return parse_stack_config(raw, project="eksbench", stack="t", region="us-west-2")


def test_a_small_file_that_expands_without_bound_is_one_line_before_any_expansion(monkeypatch):
    def expanded(*_args, **_kwargs):
        raise AssertionError("the sweeps were expanded before the total was checked")

    monkeypatch.setattr(sweep, "expand", expanded)
    entries = [{"name": f"e{i}", "nodes": list(range(1, 9)), "batch_size": list(range(1, 9))} for i in range(1600)]
    started = time.perf_counter()
    assert shape_problems(entries) == [
        "experiments: its 1600 entries make 102400 experiments once their sweeps are expanded; a stack holds at most "
        "1024: split them over several stacks (one Pulumi.<stack>.yaml each)"]
    assert time.perf_counter() - started < 1


def test_three_full_sweeps_are_over_the_total_though_each_is_within_its_own_limit():
    entries = [{"name": f"s{i}", "nodes": [1, 2, 4, 8], "batch_size": list(range(16, 16 * 17, 16))} for i in range(17)]
    (line,) = shape_problems(entries)
    assert "make 1088 experiments" in line and "at most 1024" in line


@pytest.mark.parametrize("repeats", [13, "13"])
def test_repeats_times_experiments_has_its_own_limit(repeats):
    entries = [{"name": f"e{i}", "repeats": repeats} for i in range(79)]
    assert shape_problems(entries) == [
        "experiments: its 79 experiments with their repeats make 1027 runs; a stack runs at most 1024: lower repeats, "
        "or split the experiments over several stacks"]


def test_stacks_at_the_limits_parse():
    batches = list(range(8, 8 * 17, 8))
    cfg = parses([{"name": f"s{i}", "nodes": [1, 2, 3, 4], "batch_size": batches} for i in range(16)])
    assert len(cfg.experiments) == sweep.MAX_EXPERIMENTS == 1024
    cfg = parses([{"name": "a", "nodes": [1, 2, 3, 4], "batch_size": batches, "repeats": 8}]
                 + [{"name": f"c{i}"} for i in range(512)])
    assert sum(len(e.runs()) for e in cfg.experiments) == 64 * 8 + 512 == sweep.MAX_RUNS
