"""The GPU benchmark scripts run end to end on this CPU in their smoke modes (no GPU here to measure on): each
setting side by side against a bare loop in one run."""

from __future__ import annotations

import json
from datetime import datetime, timezone


def test_gpu_resnet50_smoke_runs_trainer_and_bare_loop_on_any_device(tmp_path, monkeypatch):
    import torch

    from bench.benchmarks import gpu_resnet50

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    torch.set_num_threads(2)
    out = tmp_path / "smoke.json"
    assert gpu_resnet50.main(["--smoke", "--precision", "fp32", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["smoke"] and len(doc["results"]) == 1 and doc["results"][0]["compile"] is False
    trainer, bare = doc["results"][0]["trainer"], doc["results"][0]["bare"]
    assert trainer["img_per_s"] > 0 and bare["img_per_s"] > 0 and doc["results"][0]["overhead"] > 0
    assert trainer["steady_steps"] == 6 and trainer["step_time_p95_s"] >= trainer["step_time_p50_s"] > 0
    assert trainer["flops_per_sample"] > 0
    if not torch.cuda.is_available():
        assert trainer["mfu"] is None and "CPU" in trainer["mfu_note"] and bare["mfu"] is None


def test_gpu_resnet50_runs_each_setting_side_by_side_and_saves_by_device_and_date(tmp_path, monkeypatch, capsys):
    import torch

    from bench.benchmarks import gpu_resnet50

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setattr(gpu_resnet50, "RESULTS_DIR", tmp_path / "results")
    torch.set_num_threads(2)
    assert gpu_resnet50.main(["--smoke", "--settings", "eager/fp32/4", "eager/fp32/2", "--save"]) == 0
    [saved] = (tmp_path / "results").iterdir()
    doc = json.loads(saved.read_text())
    assert saved.name == gpu_resnet50.result_name(doc["device"]["name"], datetime.now(timezone.utc))
    assert saved.name.startswith("gpu_resnet50-cpu-" if not torch.cuda.is_available() else "gpu_resnet50-")
    rows = doc["results"]
    assert [(r["setting"], r["batch"], r["compile"]) for r in rows] == [("eager/fp32/4", 4, False),
                                                                        ("eager/fp32/2", 2, False)]
    for r in rows:
        assert r["trainer"]["img_per_s"] > 0 and r["bare"]["img_per_s"] > 0 and r["overhead"] > 0
        assert r["trainer"]["compile_s"] is None and "first_step" in r["trainer"]["startup_phases_s"]
    out = capsys.readouterr().out
    assert "eager/fp32/4: trainer" in out and "eager/fp32/2: trainer" in out


def test_gpu_resnet50_names_the_issues_table_and_refuses_a_bad_setting(capsys):
    from bench.benchmarks import gpu_resnet50

    args = gpu_resnet50.argparse.Namespace(settings=["h100-table"])
    assert [s["batch"] for s in gpu_resnet50.settings_of(args)] == [256, 256, 256, 256, 384]
    assert gpu_resnet50.main(["--settings", "compiled/amp-fp16/256"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --settings='compiled/amp-fp16/256': a setting is MODE/")
    assert "reduce-overhead" in err[0]


def test_input_pipeline_smoke_runs_the_trainers_paths_beside_bare_loops(tmp_path):
    from bench.benchmarks import input_pipeline

    out = tmp_path / "pipeline.json"
    assert input_pipeline.main(["--smoke", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    [row] = doc["results"]
    measured = {k: v for k, v in row.items() if k.endswith("_images_per_s")}
    assert set(measured) == {"bare_decode_images_per_s", "pillow_0_workers_images_per_s", "dali_0_workers_images_per_s",
                             "nvjpeg_0_workers_images_per_s", "bare_pillow_0_workers_images_per_s"}
    assert doc["skipped"] == {} and doc["device_name"]
    assert all(v > 0 for v in measured.values()) and doc["smoke"] and row["device"] == doc["device"]


def test_gpu_resnet50_keeps_the_settings_that_finished_when_a_later_one_is_cut_short(tmp_path, monkeypatch):
    """A short GPU loan's time limit can stop the run mid-table: the JSON is written after every setting."""
    import pytest
    import torch

    from bench.benchmarks import gpu_resnet50

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    torch.set_num_threads(2)
    real, calls = gpu_resnet50.bare_loop, []

    def cut_short(**kw):
        calls.append(kw)
        if len(calls) == 2:
            raise KeyboardInterrupt  # what the time limit's signal does to the second setting
        return real(**kw)
    monkeypatch.setattr(gpu_resnet50, "bare_loop", cut_short)
    out = tmp_path / "partial.json"
    with pytest.raises(KeyboardInterrupt):
        gpu_resnet50.main(["--smoke", "--settings", "eager/fp32/4", "eager/fp32/2", "--json", str(out)])
    assert [r["setting"] for r in json.loads(out.read_text())["results"]] == ["eager/fp32/4"]


def test_a_benchmark_that_cannot_rewrite_its_json_keeps_the_previous_one_whole(tmp_path, monkeypatch):
    """The JSON is rewritten after every figure; a full disk (or a kill) during a rewrite leaves the figures
    written before. Before: the file was truncated first, then half written."""
    import argparse

    import pytest

    from bench.benchmarks import gpu_resnet50
    from tests.support.closed_output import file_size_limit

    monkeypatch.setattr(gpu_resnet50, "RESULTS_DIR", tmp_path / "results")
    out = tmp_path / "gpu.json"
    out.write_text('{"results": ["the figures so far"]}')
    args = argparse.Namespace(smoke=True, json=str(out), save=True)
    rows = [{"trainer": {"device": {"name": "cpu"}}, "setting": "x" * 4096}]
    with file_size_limit(1024), pytest.raises(OSError, match="File too large"):
        gpu_resnet50.write_results(rows, args, datetime.now(timezone.utc))
    assert out.read_text() == '{"results": ["the figures so far"]}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu.json"]
    gpu_resnet50.write_results(rows, args, datetime.now(timezone.utc))
    assert json.loads(out.read_text())["results"] == rows
    assert [json.loads(p.read_text())["results"] for p in (tmp_path / "results").iterdir()] == [rows]


def test_llm_layers_smoke_trains_the_cut_model_and_counts_its_own_flops(tmp_path):
    """The Llama layers benchmark on this CPU: its figures are those of the model it measured (the cut shape's
    FLOPs per token), a CPU has no MFU, and a float8 setting is left out of a smoke run (H100/H200 only)."""
    from dataclasses import replace

    from bench.benchmarks import llm_layers
    from core.catalog.llm import MODELS

    out = tmp_path / "llm.json"
    assert llm_layers.main(["--smoke", "--settings", "eager/fp32", "default/fp8", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["model_size"] == "tiny" and [r["setting"] for r in doc["results"]] == ["eager/fp32"]
    row = doc["results"][0]
    assert row["flops_per_token"] == replace(MODELS["tiny"], n_layers=2).flops_per_token(32) and row["finite_loss"]
    assert row["tokens_per_s"] > 0 and row["mfu"] is None and row["steady_steps"] == 3


def test_llm_layers_figures_give_the_published_mfu_for_the_published_rate():
    """The benchmark's arithmetic on AWS's p5 figure: 6,785 tokens/s per H100 for Llama 3 8B at 8192 is 39.7% MFU."""
    from bench.benchmarks.llm_layers import figures
    from core.catalog.llm import MODELS

    step = 8192 / 6785  # one sequence of 8192 tokens a step at 6,785 tokens/s
    row = figures("default/bf16", shape=MODELS["8b"], seq_len=8192, batch=1, times=[step] * 3, loss=2.0,
                  device="NVIDIA H100 80GB HBM3", peak_gib=40.0)
    assert row["tokens_per_s"] == 6785.0 and row["mfu"] == 0.3973 and row["mfu_fp8_peak"] is None
    fp8 = figures("default/fp8", shape=MODELS["8b"], seq_len=8192, batch=1, times=[8192 / 7865] * 3, loss=2.0,
                  device="NVIDIA H100 80GB HBM3", peak_gib=40.0)
    assert fp8["mfu"] == 0.4606 and fp8["mfu_fp8_peak"] == 0.2302  # against the bf16 peak, and NVIDIA's fp8 one
