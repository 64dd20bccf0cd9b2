"""A run whose numbers went wrong says so: a non-finite loss ends training as diverged, amp-fp16 records its
loss scale and skipped steps, and every file is standard JSON (workloads.train.pytorch.trainer, .summary, core.contract.strict_json)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from core.contract import strict_json
from core.contract import summary_fields as F
from tests.workloads.train.test_train_timing import TINY, run_in_process
from workloads.train.common.metrics import read_jsonl, read_rank_metrics
from workloads.train.harness.summary import metrics_summary, numerical_health


def strict_loads(text: str):
    """json.loads that refuses NaN and Infinity, as jq and strict parsers do."""
    def refuse(word):
        raise ValueError(f"not JSON: {word}")
    return json.loads(text, parse_constant=refuse)


def test_strict_json_writes_null_for_non_finite_floats_at_any_depth():
    doc = {"a": float("nan"), "b": [1.5, float("inf"), {"c": -math.inf}], "d": (2, "x")}
    text = strict_json.dumps(doc)
    assert strict_loads(text) == {"a": None, "b": [1.5, None, {"c": None}], "d": [2, "x"]}
    assert [strict_json.nonfinite_name(v) for v in (math.nan, math.inf, -math.inf, 1.0)] == ["nan", "inf", "-inf", None]


def test_a_diverged_event_or_an_old_nan_line_means_diverged():
    lines = {0: [{"step": 5, "loss": 2.3}, {"step": 10, "loss": float("nan")}], 1: [{"step": 10, "loss": 2.2}]}
    assert numerical_health(lines, [])[F.DIVERGENCE] == {"step": 10,
                                                         "reason": "non-finite loss (nan) at step 10 (rank 0)"}
    null_line = {1: [{"step": 3, "loss": None, "nonfinite_loss": "inf"}]}
    assert numerical_health(null_line, [])[F.DIVERGENCE]["reason"].startswith("non-finite loss (inf) at step 3")
    event = [{"event": "diverged", "step": 2, "reason": "non-finite loss (nan) at step 2"}]
    assert numerical_health({}, event)[F.DIVERGENCE] == {"step": 2, "reason": "non-finite loss (nan) at step 2"}
    assert numerical_health({0: [{"step": 1, "loss": 1.0}]}, []) == {F.DIVERGENCE: None, F.AMP: None}


def test_the_summary_of_an_old_nan_run_is_standard_json():
    s = metrics_summary({0: [{"step": 4, "loss": float("nan"), "samples": 8, "step_time_s": 0.1, "steps": 4}]},
                        [], [], None)
    assert s["ranks"]["0"]["final_loss"] is None and s[F.DIVERGENCE]["step"] == 4
    strict_loads(strict_json.dumps(s))


@pytest.mark.local_run
def test_a_non_finite_loss_ends_training_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    run_in_process(replace(TINY, results_dir=str(tmp_path), lr=1e12, steps=40, log_every=2, warmup_steps=1,
                           checkpoint_every=1), monkeypatch)
    events = read_jsonl(tmp_path / "metrics" / "events.jsonl")
    diverged = [e for e in events if e["event"] == "diverged"]
    assert len(diverged) == 1 and diverged[0]["reason"].startswith("non-finite loss")
    step = diverged[0]["step"]
    assert step < 40 and events[-1]["event"] == "end" and events[-1]["diverged"] is True
    lines = read_rank_metrics(tmp_path)[0]
    assert lines[-1]["step"] == step and lines[-1]["loss"] is None and lines[-1]["nonfinite_loss"] in ("nan", "inf")
    saved = json.loads((tmp_path / "checkpoints" / "latest.json").read_text())
    assert saved["step"] < step  # the diverged weights were not saved over the last checkpoint
    for path in [*tmp_path.rglob("*.json"), *tmp_path.rglob("*.jsonl")]:
        for text in ([path.read_text()] if path.suffix == ".json" else path.read_text().splitlines()):
            strict_loads(text)


@pytest.mark.local_run
def test_amp_fp16_lines_carry_the_loss_scale_and_the_skipped_steps(tmp_path, monkeypatch):
    """GradScaler as on a GPU (the CPU never trains amp-fp16 itself): a first scale of 2**127 overflows, so the
    first steps are skipped and the scale halves each time; the lines count them and the loss stays finite."""
    import torch

    from workloads.train.pytorch.trainer import Run

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    run = Run(replace(TINY, results_dir=str(tmp_path), steps=6, log_every=2, warmup_steps=1),
              {"rank": 0, "world_size": 1, "local_rank": 0, "restart": 0})
    run.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127, growth_interval=1000)
    try:
        run.build()
        run.train()
    finally:
        run.close()
    lines = read_rank_metrics(tmp_path)[0]
    assert all(math.isfinite(line["loss"]) for line in lines)
    skipped = [line["skipped_steps"] for line in lines]
    assert skipped == sorted(skipped) and skipped[-1] >= 1  # cumulative, and the overflowing steps were counted
    assert lines[-1]["loss_scale"] == 2.0**127 / 2**skipped[-1]
    s = metrics_summary(read_rank_metrics(tmp_path), [], read_jsonl(tmp_path / "metrics" / "events.jsonl"), None)
    assert s[F.AMP] == {"loss_scale": lines[-1]["loss_scale"], "skipped_steps": skipped[-1]}


def test_a_frameworks_nan_loss_line_is_written_as_null_with_why_and_read_as_diverged(tmp_path):
    """TensorFlow and Paddle write their loss as it is: the metrics writer keeps NaN out of the file and says so."""
    from workloads.train.common.metrics import JsonLines

    with JsonLines(tmp_path / "metrics" / "rank-0.jsonl") as f:
        f.write({"step": 10, "loss": 2.1})
        f.write({"step": 20, "loss": float("nan"), "samples_per_s": float("inf")})
    text = (tmp_path / "metrics" / "rank-0.jsonl").read_text().splitlines()
    assert strict_loads(text[1]) == {"step": 20, "loss": None, "samples_per_s": None, "nonfinite_loss": "nan",
                                     "nonfinite_samples_per_s": "inf"}
    health = numerical_health(read_rank_metrics(tmp_path), [])
    assert health[F.DIVERGENCE] == {"step": 20, "reason": "non-finite loss (nan) at step 20 (rank 0)"}
