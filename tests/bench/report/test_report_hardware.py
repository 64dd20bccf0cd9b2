"""The report's hardware section: a GPU run's per-node timeline under the step-time chart (seen in headless
Chromium), its figures and flags, and one line for a run without GPU telemetry."""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

from bench.report import page as report
from bench.report.hardware import NO_GPU
from tests.bench.report.test_report import CHROMIUM, FLAGS, IMG
from tests.bench.report.test_report_figures import _find, _pixels, screenshot, write_interval_run
from tests.support.fake_nvml import FakeGpu, FakeNvml
from workloads.train.harness.telemetry import Sampler, open_source
from workloads.train.harness.telemetry_summary import summarise_files


def add_telemetry(exp, *, nodes=("node-0", "node-1"), seconds=40, idle_first=0, throttle=0):
    """Telemetry from a fake NVML for each node of ``exp``, and its block in the summary."""
    for node in nodes:
        util = lambda call: 0 if call <= idle_first else 95  # noqa: E731
        nvml = FakeNvml([FakeGpu(util=util, throttle=throttle), FakeGpu(util=util, used=60 * 2**30)])
        clock = [1000.0]
        sampler = Sampler(exp, node, source=open_source(nvml, exp / "no-powercap")[0], reason=None,
                          clock=lambda: clock[0])
        sampler.path.parent.mkdir(parents=True, exist_ok=True)
        sampler._file = open(sampler.path, "ab")
        for _ in range(seconds):
            sampler.sample()
            clock[0] += 1
        sampler.stop()
    summary = json.loads((exp / "summary.json").read_text())
    summary["telemetry"] = summarise_files([exp], own=nodes[0], source="nvml", reason=None)
    (exp / "summary.json").write_text(json.dumps(summary))


def test_a_gpu_run_has_its_timeline_under_the_step_time_chart_with_its_figures(tmp_path):
    exp, *_ = write_interval_run(tmp_path)
    add_telemetry(exp)
    text = report.write_report([str(tmp_path / "dev")], tmp_path / "r.html").read_text()
    alts = [alt for alt, _ in IMG.findall(text)]
    assert alts.index("GPU timeline per node") == alts.index("step time per rank") + 1
    assert "<h2>Hardware</h2>" in text and "60.0 GiB of 80 GiB" in text and "95.0 / 95" in text
    assert "80,000 J" in text and "Flag:" not in text  # 2 nodes x 2 GPUs x 500 W x 40 s
    # how it was measured, beside the figure: this NVML has no energy counter, so the power's integral
    assert "80,000 J (0.02222 kWh, integral of sampled power)" in text


def test_how_energy_was_measured_reaches_results_load_and_a_source_no_run_writes_is_dropped(tmp_path):
    from bench import results

    exp, *_ = write_interval_run(tmp_path)
    add_telemetry(exp)
    assert results.load(str(tmp_path / "dev"))["energy_source"].tolist() == ["power_integral"]
    summary = json.loads((exp / "summary.json").read_text())
    summary["telemetry"]["energy_source"] = "<script>"
    (exp / "summary.json").write_text(json.dumps(summary))
    with pytest.warns(UserWarning, match="energy_source"):
        df = results.load(str(tmp_path / "dev"))
    assert df["energy_source"].isna().all() and df["energy_j"].tolist() == [80000.0]


def test_idle_or_throttled_gpus_are_flagged(tmp_path):
    exp, *_ = write_interval_run(tmp_path)
    add_telemetry(exp, nodes=("node-0",), idle_first=20, throttle=0x40)
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["telemetry"]["idle_share"] == 0.475  # 19 of its 40 s at 0%
    text = report.write_report([str(tmp_path / "dev")], tmp_path / "r.html").read_text()
    assert "<b>Flag:</b> resnet: GPUs idle 48% of the steady time; GPU clocks throttled for 40 GPU-seconds" in text


def test_a_cpu_run_says_in_one_line_that_it_has_no_gpu_telemetry(tmp_path):
    exp, *_ = write_interval_run(tmp_path)
    summary = json.loads((exp / "summary.json").read_text())
    summary["telemetry"] = {"source": None, "reason": f"{NO_GPU} (NVML: NVML Shared Library Not Found); no CPU "
                                                      "energy either: no RAPL energy counter under /sys/class/powercap"}
    (exp / "summary.json").write_text(json.dumps(summary))
    text = report.write_report([str(tmp_path / "dev")], tmp_path / "r.html").read_text()
    section = text[text.index("<h2>Hardware</h2>"):]
    section = section[:section.index("<h2>", 5)]
    assert section.count("<p") == 1 and f"resnet: {NO_GPU} (NVML: NVML Shared Library Not Found)" in section
    assert "<img" not in section


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (.ci/setup-tests installs it: apt-get install chromium)")
def test_the_browser_shows_the_gpu_timeline(tmp_path):
    """Chromium draws the timeline figure pixel for pixel, unscaled, and the page says its flag."""
    exp, *_ = write_interval_run(tmp_path)
    add_telemetry(exp, idle_first=15)
    page = report.write_report([str(tmp_path / "dev")], tmp_path / "report.html")
    (png,) = [base64.b64decode(data) for alt, data in IMG.findall(page.read_text()) if alt == "GPU timeline per node"]
    chart, screen = _pixels(png), screenshot(page, tmp_path, 6000)
    x, y = _find(screen, chart)
    assert (screen[y:y + chart.shape[0], x:x + chart.shape[1]] == chart).all()
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p2'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert "GPUs idle 3" in dom and 'alt="GPU timeline per node"' in dom
