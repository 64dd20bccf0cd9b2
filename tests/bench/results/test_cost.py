"""Cost per result from fixture timings, checked against a hand computation."""

from __future__ import annotations

import pytest

from bench.results import cost
from bench.results import timeline as T
from bench.results.run_row import row
from core.catalog import aws as catalog
from tests.bench.conftest import summary

# A 2 x p4d.24xlarge run in us-east-1: the pod's launcher ran 3,800 s; the trainer's first step ended 120 s after
# the launcher started (5 s of it the first step); its loop took 3,605 s.
STARTUP = {"time_to_first_step_s": 120.0, "phases_s": {"launch": 60.0, "imports": 20.0, "build": 35.0,
                                                       "first_step": 5.0}}
IMAGENET_EPOCH = 1_277_952  # ImageNet's 1,281,167 less the incomplete last global batch (16 GPUs x 256)


def fixture_row(**extra):
    facts = {"wall_time_s": 3800.0, "loop_seconds": 3605.0, "startup": STARTUP, "samples_per_epoch": IMAGENET_EPOCH,
             "what_ran": {"region": "us-east-1"}}
    doc = summary("resnet50", nodes=2, gpus=8, rate=5000.0, **{**facts, **extra})
    return row(doc, ids=("gpu", "r1", "resnet50"))


def test_cost_per_result_from_the_summarys_timings_by_hand():
    assert catalog.usd_per_hour("p4d.24xlarge", "us-east-1") == 21.957642  # the price the figures below use
    c = cost.row_cost(fixture_row())
    # By hand: 2 x $21.957642 = $43.915284 an hour. Before the first step 120 s: 43.915284 x 120 / 3600 = $1.463843.
    # Steps 3605 - 5 = 3600 s: $43.915284. After the last step 3800 - 120 - 3600 = 80 s: $0.975895.
    assert c["usd_per_hour"] == pytest.approx(43.915284)
    assert c["seconds"] == {cost.BEFORE: 120.0, cost.STEPS: 3600.0, cost.AFTER: 80.0}
    assert c["usd_before_first_step"] == pytest.approx(1.463843, abs=1e-6)
    assert c["usd_steps"] == pytest.approx(43.915284, abs=1e-6)
    assert c["usd_after_last_step"] == pytest.approx(0.975895, abs=1e-6)
    assert c["usd_experiment"] == pytest.approx(43.915284 * 3800 / 3600, abs=1e-6)  # $46.355022
    # 1,000 samples at 5,000 samples/s take 0.2 s: 43.915284 x 0.2 / 3600 = $0.002440.
    assert c["usd_per_1k_samples"] == pytest.approx(0.002440, abs=1e-6)
    # An epoch of 1,277,952 samples takes 255.5904 s: 43.915284 x 255.5904 / 3600 = $3.117868.
    assert c["usd_per_epoch"] == pytest.approx(3.117868, abs=1e-6)
    assert c["estimate"] == ("estimate: us-east-1 on-demand list prices, SkyPilot catalog e385a0d, after the June 2025 "
                             "P4/P5 price cut")
    assert cost.NOT_IN_POD in c["notes"]



def test_a_compiled_models_compile_phase_is_start_up_not_steps():
    """The start-up record bills a compiled model's first-step extra time to ``compile`` and leaves it out of
    ``first_step``; the loop holds both, so the steps are the loop less both."""
    compiled = {"time_to_first_step_s": 120.0, "phases_s": {"launch": 60.0, "imports": 20.0, "build": 15.0,
                                                             "compile": 20.0, "first_step": 5.0}}
    c = cost.row_cost(fixture_row(startup=compiled))
    assert c["seconds"] == {cost.BEFORE: 120.0, cost.STEPS: 3580.0, cost.AFTER: 100.0}

def test_a_timeline_puts_provisioning_and_teardown_apart():
    # bench run's timeline.json (bench.results.timeline): the node groups are created at 300 s, the experiment's
    # first step ends at 1,380 s and its last at 4,980 s, and the teardown ends at 5,610 s.
    timeline = {"phases": [{"name": T.PREFLIGHT, "start_s": 0.0, "end_s": 40.0},
                           {"name": T.UP, "start_s": 40.0, "end_s": 1200.0},
                           {"name": T.UP_NODE_GROUPS, "start_s": 300.0, "end_s": 1100.0},
                           {"name": T.TEARDOWN, "start_s": 5000.0, "end_s": 5610.0},
                           {"name": T.AUDIT, "start_s": 5610.0, "end_s": 5700.0}],
                "experiments": [{"name": "resnet50", "first_step_s": 1380.0, "last_step_s": 4980.0}]}
    c = cost.row_cost(fixture_row(), timeline)
    # By hand: before 1380 - 300 = 1080 s, steps 4980 - 1380 = 3600 s, after 5610 - 4980 = 630 s (the
    # audit, after the teardown, bills no GPU node).
    assert c["seconds"] == {cost.BEFORE: 1080.0, cost.STEPS: 3600.0, cost.AFTER: 630.0}
    assert c["usd_before_first_step"] == pytest.approx(43.915284 * 1080 / 3600, abs=1e-6)  # $13.174585
    assert c["usd_after_last_step"] == pytest.approx(43.915284 * 630 / 3600, abs=1e-6)
    assert c["usd_experiment"] == pytest.approx(43.915284 * 5310 / 3600, abs=1e-6)
    assert cost.NOT_IN_POD not in c["notes"]
    # Another experiment shares the nodes: said, and an experiment the timeline lacks is not guessed.
    shared = {**timeline, "experiments": [*timeline["experiments"],
                                          {"name": "cifar10", "first_step_s": 1500.0, "last_step_s": 2000.0}]}
    assert any("share its nodes" in n for n in cost.row_cost(fixture_row(), shared)["notes"])
    missing = cost.row_cost(fixture_row(), {**timeline, "experiments": []})
    assert missing["usd_experiment"] is None and any("no first and last step" in n for n in missing["notes"])


def test_unknowns_are_said_not_guessed():
    local = cost.row_cost(fixture_row(image="local (no container)", device=None, instance_type=None))
    assert local["usd_experiment"] is None and local["seconds"][cost.STEPS] == 3600.0
    assert any("no price" in n for n in local["notes"])
    synthetic = cost.row_cost(fixture_row(samples_per_epoch=None))
    assert synthetic["usd_per_epoch"] is None and synthetic["usd_per_1k_samples"] is not None
    bare = cost.row_cost(fixture_row(startup=None))
    assert bare["seconds"] == {cost.BEFORE: None, cost.STEPS: 3800.0, cost.AFTER: None}
    assert any("whole wall time" in n for n in bare["notes"])
