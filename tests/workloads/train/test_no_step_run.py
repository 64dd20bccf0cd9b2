"""A trainer that exits 0 without recording one step is a failed run (workloads.train.harness.launch): its summary says
why and the launcher exits NO_STEPS_EXIT_CODE, on which the Job fails at once. Commands that record no steps of their
own (an evaluation, staging, a pserver that ends with its trainers) and the allreduce workload (its lines are message
sizes) are judged by their exit as before."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import pytest

from core.contract import summary_fields as F
from core.contract.train_args import TrainArgs
from workloads.train.harness import launch, outcome

TRAIN_CONFIG = json.dumps(asdict(TrainArgs(workload="cifar10", steps=20)))
NO_LINES = {F.COVERAGE: {"steps": 0, "duplicate_lines": 0, "missing_steps": []}, F.THROUGHPUT: {}}


def document(metrics: dict, *, trainer: bool, returncode: int = 0) -> dict:
    return outcome.summary_document(experiment="e", node_id="node-0", command=["x"], returncode=returncode,
                                   signal_name=None, started=0.0, ended=1.0, metrics=metrics,
                                   config={"workload": "cifar10"}, environ={}, log_tail=["done"], results_uri=None,
                                   trainer=trainer)


def test_a_trainer_that_exits_0_with_no_step_recorded_fails_saying_so():
    doc = document(NO_LINES, trainer=True)
    assert (doc["status"], doc["exit_code"]) == ("failed", F.NO_STEPS_EXIT_CODE)
    assert doc["stop_reason"] == doc["error"] == outcome.NO_STEP
    assert "no training step was recorded" in doc["error"]


@pytest.mark.parametrize("metrics, trainer", [
    ({**NO_LINES, F.COVERAGE: {"steps": 20}}, True),  # steps recorded
    ({**NO_LINES, F.BUSBW: {"curve": [{"bytes": 8}]}}, True),  # allreduce: one line per message size
    (NO_LINES, False),  # an evaluation, staging or a pserver: no steps of its own
    ({"metrics_error": "OSError: boom"}, True),  # the metrics could not be read: nothing to judge by
])
def test_runs_with_something_recorded_or_nothing_to_record_keep_their_exit(metrics, trainer):
    doc = document(metrics, trainer=trainer)
    assert (doc["status"], doc["exit_code"]) == ("succeeded", 0)


def test_a_failed_exit_is_still_judged_by_its_exit():
    doc = document(NO_LINES, trainer=True, returncode=3)
    assert (doc["status"], doc["exit_code"]) == ("failed", 3)


def run(tmp_path, *extra: str) -> tuple[int, dict]:
    code = launch.main(["--results-dir", str(tmp_path), "--node-id", "node-0", "--summary", "always",
                        "--experiment", "t", *extra, "--", sys.executable, "-c", "print('trained, or said so')"])
    return code, json.loads((tmp_path / "summary.json").read_text())


def test_the_launcher_of_a_trainer_whose_metrics_went_elsewhere_exits_non_zero(tmp_path):
    code, summary = run(tmp_path, "--train-config", TRAIN_CONFIG)
    assert code == F.NO_STEPS_EXIT_CODE
    assert summary["status"] == "failed" and summary["stop_reason"] == outcome.NO_STEP


def test_the_launcher_of_a_trainer_that_recorded_its_steps_succeeds(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "rank-0.jsonl").write_text(json.dumps(
        {"step": 20, "steps": 20, "samples": 160, "step_time_s": 1.0, "loss": 1.0}) + "\n")
    code, summary = run(tmp_path, "--train-config", TRAIN_CONFIG)
    assert (code, summary["status"], summary[F.COVERAGE]["steps"]) == (0, "succeeded", 20)


def test_a_command_that_is_no_trainer_or_follows_its_peers_is_judged_by_its_exit(tmp_path):
    code, summary = run(tmp_path / "eval")
    assert (code, summary["status"]) == (0, "succeeded")
    code, summary = run(tmp_path / "pserver", "--train-config", TRAIN_CONFIG, "--stop-with", str(tmp_path / "x.json"))
    assert (code, summary["status"]) == (0, "succeeded")
