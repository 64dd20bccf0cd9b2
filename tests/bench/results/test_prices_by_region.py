"""A run's dollar figures are priced in the region its pods ran in (the summary's what_ran.region, which the Job sets
from the stack), and its row says which prices they are; a run in a region with no price, or with no region
recorded, has no cost and says why: never another region's price."""

from __future__ import annotations

import pytest

from bench.results import frames as results
from bench.results import run_row
from bench.results import timeline as T
from bench.cloud.run_timeline import summary_lines
from tests.bench.conftest import summary

LABEL = "on-demand list prices, SkyPilot catalog e385a0d, after the June 2025 P4/P5 price cut"


def priced_row(**extra):
    return run_row.row(summary("a", nodes=2, **extra), ids=("s", "r", "a"))  # 1 h of 2 nodes


def test_a_run_is_priced_in_its_own_region_and_its_row_says_so():
    east = priced_row(instance_type="p5.48xlarge", what_ran={"region": "us-east-1"})
    assert east["hourly_usd"] == pytest.approx(2 * 55.04) and east["cost_usd"] == pytest.approx(2 * 55.04)
    assert (east["region"], east["prices"]) == ("us-east-1", f"us-east-1 {LABEL}")
    west1 = priced_row(instance_type="p5.48xlarge", what_ran={"region": "us-west-1"})
    assert west1["hourly_usd"] == pytest.approx(2 * 68.8) and west1["prices"] == f"us-west-1 {LABEL}"
    zoned = priced_row(instance_type="p5.48xlarge", what_ran={"zone": "us-east-1a"})  # a pinned zone names its region
    assert zoned["region"] == "us-east-1" and zoned["hourly_usd"] == pytest.approx(2 * 55.04)


def test_no_price_in_the_runs_region_or_no_region_is_no_cost_never_another_regions():
    p5e = priced_row(instance_type="p5e.48xlarge", what_ran={"region": "us-east-1"})
    assert p5e["cost_usd"] is p5e["hourly_usd"] is p5e["usd_per_1k_samples"] is None
    assert p5e["prices"] == ("p5e.48xlarge has no on-demand price in us-east-1 in eksbench's price snapshot "
                             "(SkyPilot catalog e385a0d, after the June 2025 P4/P5 price cut)")
    unknown = priced_row(instance_type="p5.48xlarge", what_ran={})
    assert unknown["cost_usd"] is None and unknown["region"] is None
    assert "p5.48xlarge has no on-demand price without a known region" in unknown["prices"]


def test_load_has_the_region_and_prices_columns(tmp_path):
    from tests.bench.conftest import write_experiment

    write_experiment(tmp_path, "gpu/r1/a", summary("a", what_ran={"region": "us-east-1"}))
    df = results.load(tmp_path / "gpu")
    assert df.loc[0, "region"] == "us-east-1" and df.loc[0, "prices"] == f"us-east-1 {LABEL}"
    assert df.loc[0, "cost_usd"] == pytest.approx(21.957642, abs=1e-4)  # p4d.24xlarge, 1 node, 1 h, in us-east-1


def test_the_timeline_records_what_its_gpu_price_is_and_the_run_says_it():
    now = [0.0]
    rec = T.Recorder(stack="s", run_id="r", gpu_nodes=2, gpu_hourly_usd=110.08, clock=lambda: now[0],
                     prices=f"us-east-1 {LABEL}")
    rec.span(T.UP_NODE_GROUPS, 0.0, 600.0, "test")
    rec.span(T.TEARDOWN, 3000.0, 3600.0, "test")
    rec.experiment("a", first_step=1200.0, last_step=2400.0)
    doc = rec.document()
    assert doc["prices"] == f"us-east-1 {LABEL}" and doc["figures"]["idle_gpu_usd"] > 0
    assert any(line.endswith(f"at us-east-1 {LABEL})") for line in summary_lines(doc))
    unpriced = T.Recorder(stack="s", run_id="r", gpu_nodes=2, gpu_hourly_usd=None, clock=lambda: now[0])
    unpriced.span(T.UP_NODE_GROUPS, 0.0, 600.0, "test")
    unpriced.span(T.TEARDOWN, 3000.0, 3600.0, "test")
    d = unpriced.document()
    assert d["gpu_hourly_usd"] is None and d["figures"]["idle_gpu_usd"] is None  # no price: no dollar figure
