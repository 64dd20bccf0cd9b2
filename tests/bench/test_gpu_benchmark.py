"""The GPU benchmark script runs end to end on this CPU in its smoke mode (no GPU here to measure on)."""

from __future__ import annotations

import json


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
