"""The autostop decision (core/config/autostop.py), the Job parsing it reads, and the autostop stack keys."""

from __future__ import annotations

import pytest

from core.config.autostop import (
    SCALE,
    WAIT,
    JobState,
    decide,
    default_deadline_minutes,
    job_state,
)
from core.config.fields import ConfigError
from core.config.model import Autostop, Experiment
from core.config.shape import parse_stack_config

T0 = 1_800_000_000.0  # the run's Jobs were created then (pulumi up)
MIN = 60.0


def at(minutes: float) -> float:
    return T0 + minutes * MIN


def job(name, state, ended=None, gate=False):
    return JobState(name=name, state=state, created_at=T0, ended_at=None if ended is None else at(ended), gate=gate)


def decision(jobs, now, *, deadline=240, idle=5):
    return decide(jobs, now=at(now), started_at=T0, deadline_minutes=deadline, idle_minutes=idle)


def test_all_done_and_idle_long_enough_scales_to_zero():
    d = decision([job("a", "Complete", ended=30), job("a-eval", "Complete", ended=40)], now=46)
    assert d.action == SCALE and "every Job finished" in d.reason
    assert d.jobs == {"a": "Complete", "a-eval": "Complete"}


def test_one_still_running_waits():
    d = decision([job("a", "Complete", ended=30), job("b", "Running")], now=200)
    assert d.action == WAIT and d.reason == "not finished: b"


def test_a_failed_job_is_finished_and_named():
    d = decision([job("a", "Failed", ended=10), job("b", "Complete", ended=20)], now=30)
    assert d.action == SCALE and "failed: a" in d.reason


def test_the_deadline_passed_scales_even_with_jobs_running():
    d = decision([job("a", "Running")], now=241, deadline=240)
    assert d.action == SCALE and "deadline passed" in d.reason and "a" in d.reason
    assert decision([job("a", "Running")], now=239, deadline=240).action == WAIT


def test_an_elastic_job_below_its_max_size_is_running_not_done():
    # An elastic Job (parallelism 2, nodes "1:2") with one pod active and no terminal condition.
    elastic = {"metadata": {"name": "cifar", "creationTimestamp": "2027-01-15T08:00:00Z"},
               "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed"},
               "status": {"active": 1, "ready": 1, "startTime": "2027-01-15T08:01:00Z"}}
    state = job_state(elastic)
    assert state.state == "Running"
    d = decide([state], now=state.created_at + 60 * MIN, started_at=state.created_at, deadline_minutes=240,
               idle_minutes=5)
    assert d.action == WAIT and "cifar" in d.reason


def test_idle_time_not_yet_reached_waits():
    d = decision([job("a", "Complete", ended=30)], now=33, idle=5)
    assert d.action == WAIT and "idle 3.0 of 5 min" in d.reason


def test_a_suspended_job_waits_while_its_gate_runs_and_counts_as_never_started_after():
    gated = [job("a", "Failed", ended=10), job("b", "Suspended"), job("b-gate", "Running", gate=True)]
    assert decision(gated, now=60).action == WAIT
    closed = [job("a", "Failed", ended=10), job("b", "Suspended"), job("b-gate", "Complete", ended=11, gate=True)]
    d = decision(closed, now=60)
    assert d.action == SCALE and "never started: b" in d.reason


def test_no_jobs_counts_idle_from_the_controller_start():
    assert decision([], now=3).action == WAIT
    assert decision([], now=6).action == SCALE


def test_job_state_reads_the_batch_v1_conditions():
    # JobStatus.conditions (Kubernetes API reference, batch/v1 Job): type Complete/Failed, status "True".
    done = {"metadata": {"name": "j", "creationTimestamp": "2027-01-15T08:00:00Z",
                         "labels": {"app.kubernetes.io/component": "gate"}},
            "spec": {}, "status": {"conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2027-01-15T08:09:00Z"},
                {"type": "Complete", "status": "True", "lastTransitionTime": "2027-01-15T08:10:00Z"}],
                "completionTime": "2027-01-15T08:10:00Z"}}
    s = job_state(done)
    assert (s.state, s.gate, s.ended_at - s.created_at) == ("Complete", True, 600)
    suspended = {"metadata": {"name": "k", "creationTimestamp": "2027-01-15T08:00:00Z"}, "spec": {"suspend": True},
                 "status": {"conditions": [{"type": "Suspended", "status": "True"}]}}
    assert job_state(suspended).state == "Suspended"


def test_default_deadline_sums_sequential_and_takes_the_longest_parallel():
    a = Experiment(name="a", timeout_minutes=60)
    b = Experiment(name="b", timeout_minutes=90, evaluate=True)
    # (60 + 60 slack) + (90 + 30 eval + 60 slack) + 30 margin
    assert default_deadline_minutes([a, b], "sequential") == 120 + 180 + 30
    assert default_deadline_minutes([a, b], "parallel") == 180 + 30


BASE = {"gpu_node_groups": [{"name": "gpu", "instance_type": "p3.16xlarge"}],
        "experiments": [{"name": "a", "timeout_minutes": 60}]}


def test_autostop_keys_default_on_with_a_derived_deadline():
    cfg = parse_stack_config(BASE, project="eksbench", stack="t", region="us-west-2")
    assert cfg.autostop == Autostop(enabled=True, deadline_minutes=None, idle_minutes=5)
    assert cfg.autostop_deadline_minutes == 60 + 60 + 30
    cfg = parse_stack_config({**BASE, "autostop": {"deadline_minutes": 90, "idle_minutes": 2, "enabled": False}},
                             project="eksbench", stack="t", region="us-west-2")
    assert (cfg.autostop.enabled, cfg.autostop_deadline_minutes, cfg.autostop.idle_minutes) == (False, 90, 2)


def test_autostop_shape_problems_are_reported_together():
    with pytest.raises(ConfigError) as e:
        parse_stack_config({**BASE, "autostop": {"deadline_minutes": 1, "idle_minutes": "soon", "stop": True}},
                           project="eksbench", stack="t", region="us-west-2")
    text = str(e.value)
    assert "autostop.deadline_minutes=1: must be >= 10" in text
    assert 'autostop.idle_minutes="soon": must be a whole number' in text
    assert "autostop.stop" in text
