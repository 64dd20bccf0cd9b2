"""Metrics files and the figures computed from them (throughput, coverage, time to accuracy)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workloads.train.common.data import Position, epoch_ends, next_slice, nth_slice
from workloads.train.common.metrics import (
    JsonLines,
    interval_line,
    keep_through,
    last_step,
    prune_after,
    read_jsonl,
    read_rank_metrics,
)
from workloads.train.harness.summary import (
    metrics_summary,
    step_coverage,
    throughput,
    time_to_accuracy,
)


def test_every_trainers_interval_line_is_one_shape_and_strict_json(tmp_path):
    """The one builder the PyTorch, TensorFlow and Paddle trainers write with: a non-finite loss is null with why,
    and a framework's loss scale (numpy scalars from TensorFlow) is a plain float and int, so the line is JSON."""
    np = pytest.importorskip("numpy")
    common = dict(step=10, epoch=0, steps=5, samples_per_step=8, seconds=2.0, step_times=[0.4000004] * 5,
                  data_wait=0.1, lr=0.1, world_size=2, rank=1, warmup=False)
    plain = interval_line(loss=1.234567, **common)
    scaled = interval_line(loss=float("nan"), loss_scale=(np.float32(32768.0), np.int64(1)), **common)
    assert plain["loss"] == 1.23457 and plain["samples"] == 40 and plain["samples_per_s"] == 20.0
    assert plain["step_times_s"] == [0.4] * 5 and "loss_scale" not in plain
    assert scaled["loss"] is None and scaled["nonfinite_loss"] == "nan"
    assert (scaled["loss_scale"], scaled["skipped_steps"]) == (32768.0, 1)
    assert type(scaled["loss_scale"]) is float and type(scaled["skipped_steps"]) is int
    assert set(scaled) - set(plain) == {"nonfinite_loss", "loss_scale", "skipped_steps"}
    with JsonLines(tmp_path / "rank-1.jsonl") as out:
        out.write(scaled)
    assert read_jsonl(tmp_path / "rank-1.jsonl") == [scaled]


def line(step, rank=0, time_s=0.5, samples=8, warmup=False, world=2, restart=0):
    return {"step": step, "rank": rank, "step_time_s": time_s, "samples": samples, "warmup": warmup,
            "world_size": world, "restart": restart, "loss": 1.0, "epoch": 0}


def test_throughput_uses_steady_steps_and_slowest_rank():
    by_rank = {0: [line(1, warmup=True, time_s=9.0), line(2, time_s=0.5), line(3, time_s=0.5)],
               1: [line(1, 1, warmup=True, time_s=9.0), line(2, 1, time_s=1.0), line(3, 1, time_s=0.5)]}
    t = throughput(by_rank)
    # steps 2 and 3: 16 samples each; durations max(0.5, 1.0) + 0.5 = 1.5 s
    assert t["samples_per_s_total"] == pytest.approx(32 / 1.5, abs=1e-3)
    assert t["samples_per_s_per_process"] == pytest.approx(16 / 1.5, abs=1e-3)
    assert t["processes"] == 2 and t["steady_steps"] == 2


def test_no_steady_steps_gives_no_rate():
    assert throughput({0: [line(1, warmup=True)]})["samples_per_s_total"] is None


def test_coverage_finds_duplicates_and_gaps():
    assert step_coverage({0: [line(s) for s in (1, 2, 3)]}) == {"steps": 3, "duplicate_lines": 0, "missing_steps": []}
    cov = step_coverage({0: [line(s) for s in (1, 2, 2, 5)], 1: [line(s, 1) for s in (1, 2)]})
    assert cov["duplicate_lines"] == 1 and cov["missing_steps"] == [3, 4] and cov["steps"] == 5


def test_time_to_accuracy_is_the_first_eval_at_target():
    evals = [{"step": 10, "epoch": 0, "accuracy": 0.5, "elapsed_s": 10.0},
             {"step": 20, "epoch": 1, "accuracy": 0.92, "elapsed_s": 21.0},
             {"step": 30, "epoch": 2, "accuracy": 0.95, "elapsed_s": 33.0}]
    out = time_to_accuracy(evals, 0.9)
    assert out["time_to_accuracy_s"] == 21.0 and out["time_to_accuracy_epoch"] == 1 and out["best_accuracy"] == 0.95
    assert time_to_accuracy(evals, 0.99)["time_to_accuracy_s"] is None
    assert time_to_accuracy([], None) == {"best_accuracy": None, "target_accuracy": None, "time_to_accuracy_s": None}


def test_summary_reports_restarts_and_world_sizes():
    s = metrics_summary({0: [line(1, world=2), line(2, world=1, restart=1)]}, [],
                        [{"event": "start"}, {"event": "resume", "step": 1}], None)
    assert s["restarts"] == 1 and s["world_sizes"] == [1, 2] and s["resumes"] == [{"event": "resume", "step": 1}]


def test_lines_are_on_disk_as_soon_as_written(tmp_path):
    path = tmp_path / "metrics" / "rank-0.jsonl"
    w = JsonLines(path)
    w.write({"step": 1})
    assert read_jsonl(path) == [{"step": 1}]  # before close: flushed per line
    w.close()


def test_half_written_last_line_is_skipped(tmp_path):
    path = tmp_path / "rank-0.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    assert read_jsonl(path) == [{"step": 1}, {"step": 2}]
    assert last_step(path) == 2
    assert last_step(tmp_path / "missing.jsonl") == 0


def test_prune_drops_lines_past_the_checkpoint_in_every_file(tmp_path):
    m = tmp_path / "metrics"
    m.mkdir()
    for rank in (0, 1):
        (m / f"rank-{rank}.jsonl").write_text("".join(json.dumps(line(s, rank)) + "\n" for s in range(1, 8)))
    (m / "eval.jsonl").write_text(json.dumps({"step": 4, "accuracy": 0.1}) + "\n" +
                                  json.dumps({"step": 7, "accuracy": 0.2}) + "\n")
    assert prune_after(tmp_path, 5) == 2 + 2 + 1
    by_rank = read_rank_metrics(tmp_path)
    assert [r["step"] for r in by_rank[0]] == [1, 2, 3, 4, 5] == [r["step"] for r in by_rank[1]]
    assert [e["step"] for e in read_jsonl(m / "eval.jsonl")] == [4]
    assert prune_after(tmp_path, 5) == 0
    assert not list(m.glob(".*"))  # no temp files left behind
    assert keep_through([{"step": 1}, {"step": 3}], 2) == ([{"step": 1}], 1)


def test_data_positions_continue_across_world_sizes_and_epochs():
    start, after = next_slice(10, Position(0, 0), 4)
    assert (start, after) == (Position(0, 0), Position(0, 4))
    start, after = next_slice(10, Position(0, 8), 4)  # 2 left < 4: next epoch
    assert (start, after) == (Position(1, 0), Position(1, 4))
    assert epoch_ends(10, Position(0, 8), 4) and not epoch_ends(10, Position(0, 4), 4)
    with pytest.raises(ValueError):
        next_slice(3, Position(), 4)


@given(size=st.integers(1, 60), data=st.data())
def test_the_nth_slice_is_where_n_plus_one_steps_read_from(size, data):
    """A reader handed step numbers (DALI's worker processes) reads where the walking loader would."""
    gb = data.draw(st.integers(1, size))
    pos = Position(data.draw(st.integers(0, 3)), data.draw(st.integers(0, size)))
    at, walked = pos, []
    for _ in range(data.draw(st.integers(1, 40))):
        start, at = next_slice(size, at, gb)
        walked.append(start)
    assert [nth_slice(size, pos, gb, n) for n in range(len(walked))] == walked


def test_a_worker_driving_several_gpus_is_counted_per_gpu():
    """A TensorFlow worker drives every GPU of its node: its metrics lines count all its replicas' samples, and the
    run's per-GPU rate and MFU divide them by the devices it drives (its run_info's devices_per_process)."""
    by_rank = {r: [line(1, r, warmup=True), line(2, r, time_s=1.0, samples=8192)] for r in (0, 1)}
    info = {"event": "run_info", "devices_per_process": 8, "flops_per_sample": 24.3e9, "precision": "amp-fp16",
            "device": {"name": "NVIDIA H100 80GB HBM3"}}
    s = metrics_summary(by_rank, [], [info], None)
    tp = s["throughput"]
    assert tp["samples_per_s_per_process"] == 8192 and tp["samples_per_s_per_device"] == 1024
    assert s["tflops_per_s_per_gpu"] == pytest.approx(24.3e9 * 1024 / 1e12, rel=1e-6)
    assert s["mfu"] == pytest.approx(24.3e9 * 1024 / 1e12 / 989, rel=1e-3)
    # one device per process (PyTorch, Horovod, Paddle, CPU runs): per device is per process
    plain = metrics_summary(by_rank, [], [{**info, "devices_per_process": None}], None)["throughput"]
    assert plain["samples_per_s_per_device"] == 8192 and plain["devices_per_process"] == 1


def test_own_tempdir_holds_the_temporary_files_made_inside_and_goes_with_them(tmp_path, monkeypatch):
    import tempfile

    from workloads.train.common.files import own_tempdir

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(RuntimeError), own_tempdir() as folder:
        made = tempfile.NamedTemporaryFile(delete=False, prefix="__autograph_generated_file")
        made.close()
        assert folder.parent == tmp_path and made.name.startswith(str(folder))
        raise RuntimeError("the trainer failed")
    assert not list(tmp_path.iterdir()) and tempfile.tempdir is None
