"""Checkpoints: atomic replace, and a restarted run resumes at the checkpoint with each step once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.workloads.conftest import child_env, run_training
from workloads.train.common.files import atomic_write
from workloads.train.common.metrics import read_jsonl
from workloads.train.pytorch.checkpoint import is_due, latest_path, load


def test_is_due():
    assert [s for s in range(0, 11) if is_due(s, 5)] == [5, 10]
    assert not any(is_due(s, 0) for s in range(10))


def test_checkpoints_are_off_only_when_both_settings_are_0():
    from workloads.train.pytorch.checkpoint import enabled

    assert not enabled(0, 0.0) and enabled(5, 0.0) and enabled(0, 10.0) and enabled(5, 10.0)


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path):
    path = tmp_path / "checkpoints" / "latest.pt"
    atomic_write(path, lambda f: f.write(b"old"))

    def broken(f):
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(path, broken)
    assert path.read_bytes() == b"old"
    assert [p.name for p in path.parent.iterdir()] == ["latest.pt"]


def train(tmp_path, steps: int, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "workloads.train.pytorch", "--workload=resnet50", "--batch-size=2", f"--steps={steps}",
           "--image-size=32", "--width-per-group=4", "--checkpoint-every=4", "--warmup-steps=1",
           f"--results-dir={tmp_path}", "--precision=fp32", "--log-every=1", *extra]
    return run_training(cmd, env=child_env(2))


@pytest.mark.local_run
def test_resume_continues_from_the_checkpoint_and_replaces_lines_past_it(tmp_path):
    first = train(tmp_path, 6)
    assert first.returncode == 0, first.stderr

    assert load(latest_path(tmp_path))["step"] == 6
    # a previous attempt that died at step 9 after checkpointing at 6 left lines 7..9 behind
    rank0 = tmp_path / "metrics" / "rank-0.jsonl"
    with open(rank0, "a") as f:
        for s in (7, 8, 9):
            f.write(json.dumps({"step": s, "stale": True, "samples": 2, "step_time_s": 1.0}) + "\n")
    second = train(tmp_path, 10)
    assert second.returncode == 0, second.stderr
    assert "from step 6" in second.stdout
    lines = read_jsonl(rank0)
    assert [r["step"] for r in lines] == list(range(1, 11))
    assert not any(r.get("stale") for r in lines)
    events = read_jsonl(tmp_path / "metrics" / "events.jsonl")
    resume = [e for e in events if e["event"] == "resume"]
    assert resume and resume[0]["step"] == 6 and resume[0]["dropped_lines"] == 3
    assert load(latest_path(tmp_path))["step"] == 10


def test_background_writer_writes_in_order_and_reports_failures(tmp_path, monkeypatch):
    import torch

    from workloads.train.pytorch import checkpoint

    writer = checkpoint.BackgroundWriter()
    live = torch.ones(3)
    snap = checkpoint.to_cpu({"w": live, "nested": [live], "step": 1})
    live.add_(1)  # the loop changes the parameters after the snapshot
    assert writer.submit(tmp_path, snap, {"step": 1}) is None
    done = writer.submit(tmp_path, checkpoint.to_cpu({"w": live, "step": 2}), {"step": 2})
    assert done["step"] == 1 and done["write_s"] >= 0
    assert writer.wait()["step"] == 2
    assert load(latest_path(tmp_path))["step"] == 2
    assert torch.equal(snap["w"], torch.ones(3)) and torch.equal(snap["nested"][0], torch.ones(3))

    def broken(results_dir, state):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint, "save", broken)
    writer.submit(tmp_path, {"step": 3}, {"step": 3})
    with pytest.raises(OSError, match="disk full"):
        writer.wait()
    writer.close()
    assert load(latest_path(tmp_path))["step"] == 2


def test_a_checkpoint_of_other_arguments_is_never_resumed(tmp_path):
    """A reused run id with a changed batch size merged two configurations into one "succeeded" summary."""
    from dataclasses import asdict

    from core.contract.train_args import TrainArgs
    from workloads.train.pytorch.checkpoint import arguments_changed

    saved = asdict(TrainArgs(batch_size=8, steps=10))
    assert arguments_changed(saved, asdict(TrainArgs(batch_size=8, steps=20, log_every=5))) == []
    assert arguments_changed(saved, asdict(TrainArgs(batch_size=16, steps=10))) == ["batch_size: 8 -> 16"]
    assert arguments_changed(None, asdict(TrainArgs())) == []


def test_the_trainer_refuses_to_resume_a_checkpoint_of_other_arguments(tmp_path):
    import pytest

    from workloads.train.pytorch.trainer import main

    common = ["--workload=resnet50", "--dataset=synthetic", "--image-size=32", "--width-per-group=4",
              "--steps=2", "--checkpoint-every=1", "--warmup-steps=0", f"--results-dir={tmp_path}"]
    assert main(common + ["--batch-size=2"]) == 0
    with pytest.raises(RuntimeError, match=r"other arguments \(batch_size: 2 -> 4\).*never resumed"):
        main(common + ["--batch-size=4", "--steps=3"])
