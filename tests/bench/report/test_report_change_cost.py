"""The report's change between runs and cost per result, in the HTML and as headless Chromium renders them."""

from __future__ import annotations

import html
import json
import re
import subprocess

import pytest

from bench.report import page as report
from tests.bench.report.test_report import CHROMIUM, FLAGS
from tests.bench.results.test_compare import write_run
from tests.bench.conftest import summary, write_experiment

STARTUP = {"time_to_first_step_s": 90.0, "phases_s": {"launch": 50.0, "build": 30.0, "first_step": 10.0}}


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """results/gpu/: resnet50 in r1, then r2 with 20% shorter steps and a newer driver; cifar10 once (r1)."""
    root = tmp_path_factory.mktemp("chg") / "results" / "gpu"
    for rel, seed, step_time, driver in (("r1/resnet50", 1, 0.1, "580.1"), ("r2/resnet50", 2, 0.08, "590.2"),
                                         ("r1/cifar10", 3, 0.1, "580.1")):
        d = write_run(root, rel, seed, step_time=step_time, driver=driver, region="us-east-1")
        doc = json.loads((d / "summary.json").read_text())
        doc.update(wall_time_s=1200.0, loop_seconds=1060.0, startup=STARTUP, samples_per_epoch=49_984)
        (d / "summary.json").write_text(json.dumps(doc))
    out = report.write_report([str(root)], tmp_path_factory.mktemp("out") / "report.html")
    return out


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", markup)))


def test_change_between_runs_shows_the_verdict_interval_and_what_differs(page):
    text = text_of(page.read_text())
    row = re.search(r"resnet50 \(stack gpu\) r1 \(1\) r2 \(1\) ([\d.]+) ([\d.]+) ([\d.]+) \[([\d.]+), ([\d.]+)\] "
                    r"indicative: faster", text)
    assert row, text[text.find("Change between runs"):][:1500]
    a, b, ratio, low, high = map(float, row.groups())
    assert 1.2 < low < ratio < high < 1.3 and abs(ratio - b / a) < 0.02
    assert "driver: 580.1 → 590.2" in text
    assert "gpu/cifar10" not in text[text.find("Change between runs"):text.find("Cost (estimate)")]  # ran once


def test_cost_per_result_is_shown_with_its_price_region_and_date(page):
    text = text_of(page.read_text())
    assert "Cost per result (estimate)" in text
    assert "us-east-1 on-demand list prices, SkyPilot catalog e385a0d, after the June 2025 P4/P5 price cut" in text
    # p4d.24xlarge in us-east-1 $21.957642/h, 1 node: 90 s before the first step = $0.5489; steps 1060 - 10 = 1050 s
    # = $6.404; after: 1200 - 90 - 1050 = 60 s = $0.366; the experiment's 1200 s = $7.319.
    assert "90 s ($0.5489)" in text and "1,050 s ($6.404)" in text and "60 s ($0.366)" in text
    assert " 7.319 " in text


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (.ci/setup-tests installs it: apt-get install chromium)")
def test_the_browser_renders_the_change_and_cost_tables(page, tmp_path):
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p'}", "--virtual-time-budget=5000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    text = text_of(dom)
    assert re.search(r'data-images-loaded="(\d+)/\1"', dom), "every figure decodes"
    assert "Change between runs" in text and "faster" in text and "driver: 580.1 → 590.2" in text
    assert "Cost per result (estimate)" in text and "90 s ($0.5489)" in text


def test_the_change_between_runs_goes_from_the_first_started_run_to_the_last(tmp_path):
    """A notebook's run (nb-...) sorts after a local run's timestamp id by name; it started first, so it is A,
    not B (and a summary without a time zone reads as UTC)."""
    from bench import results as frames
    from bench.report.compare import run_pairs

    root = tmp_path / "results" / "dev"
    for run, started, rate in (("nb-20261125", "2026-11-25T09:00:00Z", 900.0),
                               ("20261126-090000", "2026-11-26T09:00:00", 1000.0),
                               ("20261127-080000", "2026-11-27T08:00:00+00:00", 1100.0)):
        write_experiment(root, f"{run}/resnet50", summary("resnet50", rate=rate, started_at=started))
    runs = frames.runs(str(root))
    [(label, a, b, _, _)] = run_pairs(runs)
    assert (a, b) == ("nb-20261125", "20261127-080000"), (a, b)


def test_two_runs_a_side_show_an_undetermined_interval_and_no_verdict(tmp_path):
    """Two runs of identical code a side whose Fieller set reaches below 0 ([-1.70, 3.31]): the report prints it
    undetermined, and two runs a side are indicative, as eksbench compare says."""
    from bench import results as frames
    from bench.report.compare import change_rows

    root = tmp_path / "results" / "dev"
    for run, started, rates in (("r1", "2026-11-25T09:00:00Z", (100.0, 102.0)),
                                ("r2", "2026-11-26T09:00:00Z", (60.0, 100.0))):
        for k, rate in enumerate(rates, 1):
            write_experiment(root, f"{run}/resnet50/repeat_{k}", summary("resnet50", rate=rate, started_at=started))
    (row,) = change_rows(frames.runs(str(root)))
    assert row["interval"] == "undetermined" and row["verdict"] == "indicative: no change at this noise"
    assert row["a"] == "r1 (2)" and row["b"] == "r2 (2)"
