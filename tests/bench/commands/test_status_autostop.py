"""bench status: what the cluster's autostop controller did (its autostop.json, read from S3 through its
reader), and what the stack still bills with the GPU groups at zero (infra/cluster/estimate.py's figure)."""

from __future__ import annotations

import json
import warnings

import pytest

from bench.cloud import observe as cloud_observe
from bench.commands import observe
from core.contract.results_location import ResultsLocation
from infra.cluster.estimate import cost_after_autostop, hourly_cost
from program.stack_files import load_stack_config

BUCKET, REGION = "status-results", "us-east-1"


@pytest.fixture
def s3(monkeypatch):
    from moto import mock_aws

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        import boto3

        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        yield client


def record(**extra):
    # the shape workloads/train/control/autostop.py act() writes
    doc = {"decided_at": "2026-11-24T01:02:03+00:00", "action": "scale",
           "reason": "every Job of run r1 ended (2 Complete, 0 Failed) and the GPU nodes idled 5 min",
           "jobs": {"experiments-a-job": "Complete"}, "cluster": "eksbench-dev", "run_id": "r1",
           "node_groups": [{"name": "p3-1", "before": {"minSize": 2, "maxSize": 2, "desiredSize": 2},
                            "after": {"minSize": 0, "maxSize": 2, "desiredSize": 0}, "changed": True},
                           {"name": "g5-1", "before": {"desiredSize": 0}, "after": {"desiredSize": 0},
                            "changed": False}]}
    doc.update(extra)
    return doc


def test_status_shows_what_autostop_scaled_when_and_why(s3):
    run = ResultsLocation(BUCKET, "eksbench", "dev", "r1")
    s3.put_object(Bucket=BUCKET, Key=run.key("autostop.json"), Body=json.dumps(record()).encode())
    s3.put_object(Bucket=BUCKET, Key=run.child("a").key("summary.json"),
                  Body=json.dumps({"experiment": "a", "status": "succeeded"}).encode())
    autostops: dict = {}
    runs = cloud_observe.s3_runs(ResultsLocation(BUCKET, "eksbench", "dev"), REGION, autostops)
    assert runs == {"r1": {"a": "succeeded"}} and set(autostops) == {"r1"}
    text = observe.render_status({"stack": "dev", "state": None, "notes": [], "local_runs": {}, "s3_runs": runs,
                                  "s3_prefix": f"s3://{BUCKET}/eksbench/dev/", "autostop": autostops})
    line = next(line for line in text.splitlines() if "autostop:" in line)
    assert "2026-11-24T01:02:03" in line and "p3-1 2->0" in line and "g5-1" not in line
    assert "every Job of run r1 ended" in line


def test_a_record_of_the_wrong_shape_is_read_through_its_reader(s3):
    run = ResultsLocation(BUCKET, "eksbench", "dev", "r2")
    s3.put_object(Bucket=BUCKET, Key=run.key("autostop.json"),
                  Body=json.dumps(record(reason=["<not text>"], node_groups="all of them")).encode())
    autostops: dict = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cloud_observe.s3_runs(ResultsLocation(BUCKET, "eksbench", "dev"), REGION, autostops)
    assert any("autostop.json" in str(w.message) and "reason" in str(w.message) for w in caught)
    assert observe.autostop_lines("r2", autostops["r2"]) == [
        "      autostop: at 2026-11-24T01:02:03+00:00 scaled nothing: (no reason given)"]


def test_what_still_bills_after_autostop_is_the_estimates_figure():
    cfg = load_stack_config("dev")
    expected = cost_after_autostop(hourly_cost(cfg, nat_gateways=1, today="2026-11-24"))  # dev: nat single
    assert cloud_observe.after_autostop_usd(cfg, {}, today="2026-11-24") == expected
    assert 0 < expected < 1  # control plane, NAT, system nodes: no GPU
    assert cloud_observe.after_autostop_usd(cfg, {"hourly_cost_after_autostop_usd": 0.42}) == 0.42  # the stack's own
    text = observe.render_status({"stack": "dev", "notes": [], "local_runs": {}, "s3_runs": {},
                                  "state": {"last": "update", "result": "succeeded", "ended": None, "resources": 80},
                                  "after_autostop_usd": expected})
    assert f"still bills about ${expected:.2f}/h until destroyed" in text


@pytest.mark.hostile
def test_one_hostile_summary_on_s3_hides_no_other_run(s3):
    """A summary with a 401-digit number, one nested 600 deep, and a run prefix that is not a folder name:
    bench status still lists every run (before: OverflowError hid all of them)."""
    good = ResultsLocation(BUCKET, "eksbench", "dev", "r1").child("a")
    s3.put_object(Bucket=BUCKET, Key=good.key("summary.json"), Body=b'{"status": "succeeded"}')
    huge = ResultsLocation(BUCKET, "eksbench", "dev", "r2").child("b")
    s3.put_object(Bucket=BUCKET, Key=huge.key("summary.json"),
                  Body=b'{"status": "failed", "wall_time_s": ' + b"9" * 401 + b"}")
    deep = ResultsLocation(BUCKET, "eksbench", "dev", "r2").child("c")
    nested = b"[" * 600 + b"]" * 600
    s3.put_object(Bucket=BUCKET, Key=deep.key("summary.json"), Body=b'{"status": "x", "y": ' + nested + b"}")
    s3.put_object(Bucket=BUCKET, Key="eksbench/dev/../summary.json", Body=b"{}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = cloud_observe.s3_runs(ResultsLocation(BUCKET, "eksbench", "dev"), REGION, {})
    assert runs == {"r1": {"a": "succeeded"}, "r2": {"b": "failed", "c": "x"}}
    notes = " ".join(str(w.message) for w in caught)
    assert "wall_time_s" in notes and "nested deeper than 32 levels" in notes and "'..'" in notes
