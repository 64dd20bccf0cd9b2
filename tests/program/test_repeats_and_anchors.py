"""repeats: N in the stack file (bounds, what a run of it is, where its results go), and the published
scaling anchors as data (each row consistent with the throughputs it was copied with)."""

from __future__ import annotations

import pytest

from core.catalog.scaling_anchors import ANCHORS, anchor_for
from core.config.model import Experiment
from core.contract.results_location import ResultsLocation, repeat_folder, repeat_number
from tests.program.test_config import problems
from tests.program.test_sweep import stack


def test_repeats_gives_one_run_per_repeat_each_with_its_folder():
    from tests.program.test_config import parse

    (e,) = parse(stack({"name": "rn", "repeats": 3})).experiments
    runs = e.runs()
    assert [(r.name, r.repeat, r.results_path, r.label) for r in runs] == [
        ("rn", 1, "rn/repeat_1", "rn repeat 1/3"), ("rn", 2, "rn/repeat_2", "rn repeat 2/3"),
        ("rn", 3, "rn/repeat_3", "rn repeat 3/3")]
    single = Experiment(name="solo")
    assert single.runs() == (single,) and single.results_path == "solo" and single.label == "solo"
    loc = ResultsLocation("b", "eksbench", "dev", "run-001", "rn")
    assert loc.repeat_run(2).uri == "s3://b/eksbench/dev/run-001/rn/repeat_2/" and loc.repeat_run(0) == loc
    assert repeat_number(repeat_folder(7)) == 7 and repeat_number("rn") is None and repeat_number("repeat_01") is None


@pytest.mark.parametrize("value, rule", [(0, "must be >= 1"), (21, "must be <= 20"), ("two", "must be a whole number"),
                                         (True, "must be a whole number")])
def test_repeats_out_of_bounds_is_one_line_naming_the_key(value, rule):
    got = problems(stack({"name": "rn", "repeats": value}))
    assert len(got) == 1 and got[0].startswith("experiments[0].repeats=") and rule in got[0], got


def test_the_default_deadline_counts_every_repeat():
    from core.config.autostop import default_deadline_minutes, experiment_budget_minutes

    one, three = Experiment(name="a"), Experiment(name="b", repeats=3)
    assert default_deadline_minutes((one, three), "sequential") - default_deadline_minutes((one,), "sequential") \
        == 3 * experiment_budget_minutes(three)
    assert default_deadline_minutes((three,), "parallel") == default_deadline_minutes((three,), "sequential")


@pytest.mark.parametrize("anchor", ANCHORS, ids=lambda a: f"{a.gpu_model}-{a.precision}")
def test_each_anchor_row_agrees_with_its_own_throughputs(anchor):
    # the published speedup is the ratio of the published throughputs (to their rounding)
    assert anchor.images_per_s / anchor.images_per_s_1 == pytest.approx(anchor.speedup, abs=0.03)
    assert anchor.efficiency == pytest.approx(anchor.speedup / anchor.gpus)
    assert "DeepLearningExamples" in anchor.source and "resnet50v1.5" in anchor.source


def test_the_issue_figures_are_the_anchors():
    # 8-GPU strong scaling 7.7x in TF32/FP32, 6.7-6.9x with AMP
    assert {round(a.speedup, 1) for a in ANCHORS if a.precision == "fp32"} == {7.7, 7.8}
    assert {round(a.speedup, 1) for a in ANCHORS if a.precision == "amp-fp16"} == {6.7, 6.9}
    assert anchor_for("resnet50", "amp-fp16", "V100")[0].speedup == 6.93
    assert anchor_for("resnet50", "fp32", "H100") == (anchor_for("resnet50", "fp32", "A100")[0], False)
    assert anchor_for("resnet50", "bf16", "A100") is None and anchor_for("cifar10", "fp32", "A100") is None
