"""Telemetry as results read it: summary figures as columns of ``results.load``, energy per result, and the
timeline frame ``results.telemetry``, bounded like the rank files."""

from __future__ import annotations

import json
import warnings

import pytest

from bench import results
from bench.results import readers as R
from bench.results.hardware import energy_figures, telemetry_flags
from tests.support.fake_nvml import FakeGpu, FakeNvml
from workloads.train.harness.telemetry import Sampler, open_source
from workloads.train.harness.telemetry_summary import summarise_files


def gpu_run(root, *, seconds=30, nodes=("node-0", "node-1"), rate=1000.0, to_accuracy=None):
    """An experiment folder as a 2-node GPU run leaves it: each node's telemetry from a fake NVML, and the summary."""
    exp = root / "dev" / "run-1" / "resnet"
    for node in nodes:
        source, reason = open_source(FakeNvml([FakeGpu(), FakeGpu(throttle=0x4)]), root / "no-powercap")
        s = Sampler(exp, node, source=source, reason=reason, clock=lambda: clock[0])
        clock = [1000.0]
        s.path.parent.mkdir(parents=True, exist_ok=True)
        s._file = open(s.path, "ab")
        for _ in range(seconds + 1):
            s.sample()
            clock[0] += 1
        s.stop()
    block = summarise_files([exp], own="node-0", source="nvml", reason=None, to_accuracy=to_accuracy)
    summary = {"experiment": "resnet", "status": "succeeded", "wall_time_s": 40.0, "telemetry": block,
               "throughput": {"samples_per_s_total": rate}, "instance_type": "p4d.24xlarge",
               "device": {"name": "NVIDIA A100-SXM4-40GB"}}
    (exp / "summary.json").write_text(json.dumps(summary))
    return exp


def test_load_gives_the_telemetry_and_energy_per_result_as_columns(tmp_path):
    gpu_run(tmp_path)
    df = results.load(str(tmp_path / "dev"))
    r = df.iloc[0]
    # 2 nodes x 2 GPUs x 500 W, for 31 samples a second apart (the last at stop, at the same time as the one before)
    assert r["energy_j"] == 4 * 500.0 * 31 and r["power_mean_w"] == 2000.0
    assert r["kwh"] == pytest.approx(4 * 500.0 * 31 / 3.6e6, abs=1e-6)
    assert r["joules_per_sample"] == 2.0  # 2,000 W over 1,000 samples/s
    assert r["util_mean_pct"] == 90.0 and r["util_p95_pct"] == 90.0 and r["memory_peak_bytes"] == 40 * 2**30
    assert r["throttle_s"] == 2 * 31.0 and str(df["energy_j"].dtype) == "float64"


def test_load_gives_the_energy_to_accuracy_where_an_evaluation_reached_the_target(tmp_path):
    gpu_run(tmp_path / "hit", to_accuracy=(1000.0, 1012.5))
    gpu_run(tmp_path / "missed")
    hit, missed = (results.load(str(tmp_path / kind / "dev")).iloc[0] for kind in ("hit", "missed"))
    assert hit["energy_to_accuracy_j"] == 4 * 500.0 * 12.5  # 2 nodes x 2 GPUs x 500 W for 12.5 s
    assert missed["energy_to_accuracy_j"] != missed["energy_to_accuracy_j"]  # NaN: no evaluation reached it
    hostile = energy_figures({"energy_to_accuracy_j": "much"}, 1.0)
    assert hostile["energy_to_accuracy_j"] is None


def test_the_timeline_frame_has_one_row_per_sample_and_device(tmp_path):
    gpu_run(tmp_path, seconds=5)
    tl = results.telemetry(str(tmp_path / "dev"))
    assert len(tl) == 2 * 2 * 7  # nodes x GPUs x samples
    assert set(tl["node"]) == {"node-0", "node-1"} and set(tl["device"]) == {"gpu0", "gpu1"}
    assert str(tl["t"].dtype).startswith("datetime64") and tl["power_w"].eq(500.0).all()
    assert tl[tl["device"] == "gpu1"]["throttled"].all() and not tl[tl["device"] == "gpu0"]["throttled"].any()


def test_a_hostile_telemetry_file_is_bounded_and_named(tmp_path, monkeypatch):
    exp = gpu_run(tmp_path, seconds=3, nodes=("node-0",))
    bad = exp / "telemetry" / "node-1.jsonl"
    bad.write_text("\n".join([json.dumps({"t": 1, "gpus": [{"index": 0, "util_pct": "lots"}]}), "{not json",
                              json.dumps({"t": 2, "gpus": [{"index": 0, "util_pct": 50}]}), *["{}"] * 20]) + "\n")
    monkeypatch.setattr(R, "MAX_LINES", 10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tl = results.telemetry(str(tmp_path / "dev"))
    said = [str(w.message) for w in caught if "node-1.jsonl" in str(w.message)]
    assert len(said) == 1 and "malformed" in said[0] and "gpus" in said[0] and "first 10" in said[0]
    assert tl[tl["node"] == "node-1"]["util_pct"].tolist() == [50.0]


def test_energy_figures_read_what_a_summary_gives_and_nothing_else():
    assert energy_figures({"energy_j": 7.2e6, "power_mean_w": 400.0}, 200.0)["kwh"] == 2.0
    assert energy_figures({"energy_j": 7.2e6, "power_mean_w": 400.0}, 200.0)["joules_per_sample"] == 2.0
    with pytest.warns(UserWarning, match=r"^summary.json: telemetry power_mean_w=nan: below zero or not a finite "):
        none = energy_figures({"energy_j": "x", "power_mean_w": float("nan"), "reason": "no GPU telemetry"}, 0)
    assert none["energy_j"] is None and none["joules_per_sample"] is None
    assert none["telemetry_note"] == "no GPU telemetry"
    assert energy_figures(None, None)["kwh"] is None
    with pytest.warns(UserWarning, match=r"^dev/r1/x: telemetry energy_j=-1.0, power_mean_w=-400.0: below zero"):
        negative = energy_figures({"energy_j": -1.0, "power_mean_w": -400.0}, 200.0, where="dev/r1/x")
    assert negative["kwh"] is None and negative["joules_per_sample"] is None  # never a negative energy


def test_idle_or_throttled_gpus_are_flagged():
    assert telemetry_flags({"idle_share": 0.3, "throttle_s": 12.0}) == [
        "GPUs idle 30% of the steady time", "GPU clocks throttled for 12 GPU-seconds"]
    assert telemetry_flags({"idle_share": 0.1, "throttle_s": 0.0}) == []


def test_a_summary_with_a_wrong_telemetry_field_keeps_the_rest(tmp_path):
    exp = gpu_run(tmp_path, seconds=2, nodes=("node-0",))
    summary = json.loads((exp / "summary.json").read_text())
    summary["telemetry"]["energy_j"] = "a lot"
    (exp / "summary.json").write_text(json.dumps(summary))
    with pytest.warns(UserWarning, match="telemetry.energy_j"):
        r = results.load(str(tmp_path / "dev")).iloc[0]
    assert r["energy_j"] != r["energy_j"] and r["power_mean_w"] == 1000.0


def test_status_and_the_results_table_show_energy_per_result_beside_the_throughput(tmp_path):
    from bench.commands.observe import status_document, status_table
    from bench.results.overview import run_figures, status_row
    from bench.terminal import results_table

    exp = gpu_run(tmp_path, seconds=4, nodes=("node-0",))
    summary = json.loads((exp / "summary.json").read_text())
    fig = run_figures(summary)
    assert fig["joules_per_sample"] == 1.0 and fig["kwh"] == round(2 * 500.0 * 5 / 3.6e6, 6)  # 5 s at 1,000 W
    row = status_row(run="run-1", experiment="resnet", repeat=None, summary=summary, results=str(exp))
    assert "1 J/sample, 0.00139 kWh" in status_table([row])
    assert status_document({"stack": "dev", "state": None, "notes": [], "runs": [row]})["runs"][0][
        "joules_per_sample"] == 1.0
    table = results_table([{"experiment": "resnet", "status": "succeeded", **fig}])
    assert "energy" in table.splitlines()[0] and "1 J/sample, 0.00139 kWh" in table
    assert "energy" not in results_table([{"experiment": "cpu", "status": "succeeded"}]).splitlines()[0]


def test_compare_shows_energy_per_sample_a_side(tmp_path):
    from bench.commands.compare import render
    from bench.results.compare import comparison

    a = [({"experiment": "resnet", "status": "succeeded", "samples_per_s": 1000.0, "joules_per_sample": 2.0}, {})]
    b = [({"experiment": "resnet", "status": "succeeded", "samples_per_s": 1250.0, "joules_per_sample": 1.6}, {})]
    doc = comparison(a, b, a="A", b="B")
    assert doc["experiments"][0]["a_joules_per_sample"] == 2.0
    assert "  resnet: A 2 J/sample, B 1.6 J/sample (B/A 0.800)" in render(doc).splitlines()
    none = comparison([(dict(a[0][0], joules_per_sample=None), {})], b, a="A", b="B")
    assert "  resnet: A — J/sample, B 1.6 J/sample" in render(none).splitlines()
