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
                  Body=json.dumps({"experiment": "a", "status": "succeeded", "started_at": "2026-11-24T00:40:00Z",
                                   "wall_time_s": 1290.0,
                                   "busbw": {"peak_gbps": 181.5, "peak_at_bytes": 1 << 30, "curve": []}}).encode())
    autostops: dict = {}
    runs = cloud_observe.s3_runs(ResultsLocation(BUCKET, "eksbench", "dev"), REGION, autostops)
    assert runs == {"r1": {"a": "succeeded"}} and set(autostops) == {"r1"}
    rows = cloud_observe.s3_status_rows(ResultsLocation(BUCKET, "eksbench", "dev"), REGION)
    text = observe.render_status({"stack": "dev", "state": None, "notes": [], "runs": rows,
                                  "s3_prefix": f"s3://{BUCKET}/eksbench/dev/", "autostop": autostops})
    head, table = text.split("\n\n")
    line = next(line for line in head.splitlines() if "autostop in run r1:" in line)
    assert "2026-11-24T01:02:03" in line and "p3-1 2->0" in line and "g5-1" not in line
    assert "every Job of run r1 ended" in line
    assert " ".join(table.splitlines()[2].split()) == (
        f"r1 a succeeded 2026-11-24 00:40:00 21m 30s 182 GB/s busbw s3://{BUCKET}/eksbench/dev/r1/a/")


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
        "  autostop in run r2: at 2026-11-24T01:02:03+00:00 scaled nothing: (no reason given)"]


def test_status_names_the_jobs_autostop_suspended_for_the_autoscaler(s3):
    run = ResultsLocation(BUCKET, "eksbench", "dev", "r3")
    s3.put_object(Bucket=BUCKET, Key=run.key("autostop.json"), Body=json.dumps(record(
        node_groups=[], suspended_jobs=["experiments-a-job"],
        reason="deadline passed: 330 min since the run's Jobs were created; still not finished: experiments-a-job"
    )).encode())
    autostops: dict = {}
    cloud_observe.s3_runs(ResultsLocation(BUCKET, "eksbench", "dev"), REGION, autostops)
    assert observe.autostop_lines("r3", autostops["r3"]) == [
        "  autostop in run r3: at 2026-11-24T01:02:03+00:00 scaled nothing, suspended experiments-a-job: "
        "deadline passed: 330 min since the run's Jobs were created; still not finished: experiments-a-job"]


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


def test_what_still_bills_after_autostop_names_its_prices_or_the_type_with_none():
    import dataclasses

    cfg = load_stack_config("dev")
    prices = cloud_observe.after_autostop_prices(cfg)
    assert prices == ("system nodes at us-west-2 on-demand list prices, SkyPilot catalog e385a0d, after the June 2025 "
                      "P4/P5 price cut; the rest at us-west-2 list prices as of 2026-11-22")
    state = {"last": "update", "result": "succeeded", "ended": None, "resources": 80}
    text = observe.render_status({"stack": "dev", "notes": [], "state": state, "after_autostop_usd": 0.34,
                                  "after_autostop_prices": prices})
    assert "still bills about $0.34/h until destroyed" in text and f"    ({prices})" in text
    # m7i.large lists no price in eu-south-1: no figure, and the type named
    south = dataclasses.replace(cfg, region="eu-south-1",
                                system_nodes=dataclasses.replace(cfg.system_nodes, instance_type="m7i.large"))
    assert cloud_observe.after_autostop_usd(south, {}, today="2026-11-24") is None
    why = cloud_observe.after_autostop_prices(south)
    assert why.startswith("m7i.large has no on-demand price in eu-south-1")
    text = observe.render_status({"stack": "dev", "notes": [], "state": state, "after_autostop_usd": None,
                                  "after_autostop_prices": why})
    assert f"still bills until destroyed, at a rate not estimated: {why}" in text


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


def test_s3_logs_tail_and_node(s3, monkeypatch):
    """``bench logs --tail N --node K`` of a run whose pods are gone: the node logs the launchers uploaded."""
    from bench.cloud import pulumi_cli

    def no_cli(*args, **kwargs):
        raise RuntimeError("the Pulumi CLI is not on PATH")

    monkeypatch.setattr(pulumi_cli, "outputs", no_cli)
    monkeypatch.setattr(cloud_observe, "results_bucket", lambda cfg, root: BUCKET)
    cfg = load_stack_config("dev")
    exp = ResultsLocation(BUCKET, cfg.project, "dev", "r1", "resnet50-synthetic")
    for node, text in (("node-0", "a\nb\nc\n"), ("node-1", "x\ny\n")):
        s3.put_object(Bucket=BUCKET, Key=exp.key(f"logs/{node}.log"), Body=text.encode())
    s3.put_object(Bucket=BUCKET, Key=exp.key("logs/node-0.log.times"), Body=b"0 1764236000.0\n4 1764236001.5\n")

    class Observed(cloud_observe.CloudObservation):
        stack, root = "dev", None

    Observed.cfg = cfg
    logs = Observed().logs
    assert list(logs("resnet50-synthetic", run_id="r1", tail=1)) == ["node-0: c", "node-1: y"]
    assert list(logs("resnet50-synthetic", run_id="r1", node="1")) == ["node-1: x", "node-1: y"]
    assert list(logs("resnet50-synthetic", run_id="r1", tail=2, timestamps=True)) == [  # a times file is no log
        "node-0: -                        b", "node-0: 2025-11-27T09:33:21.500Z c",
        "node-1: -                        x", "node-1: -                        y"]
    with pytest.raises(ValueError, match="^no node 'node-2' in the logs of s3://status-results/eksbench/dev/r1/resnet50-synthetic/; nodes: "
                                         "node-0, node-1$"):
        logs("resnet50-synthetic", run_id="r1", node="node-2")


def test_cluster_logs_name_each_pod_by_its_node_and_tail_it(monkeypatch):
    """While the pods run, ``--node 1`` is the pod of completion index 1 (the launcher's node-1) and ``--tail``
    is the API's tailLines."""
    from bench.cloud import kube

    def pod(name: str, index: str) -> dict:  # core/v1 Pod, as the Job controller annotates an Indexed Job's pods
        return {"metadata": {"name": name, "annotations": {"batch.kubernetes.io/job-completion-index": index}},
                "status": {"phase": "Running"}}

    class Cluster:  # the three calls cluster_logs makes; any other is an AttributeError
        def __init__(self, access):
            self.asked: list = []

        def pods(self, namespace, selector):
            return [pod("exp-job-0-abcde", "0"), pod("exp-job-1-fghij", "1")]

        def log_tail(self, namespace, name, lines, timestamps=False):
            # with timestamps, the kubelet's RFC3339Nano time first (Go drops a fraction's trailing zeros)
            return [("2026-11-27T09:12:39.12Z " if timestamps else "") + f"{name} line {i}"
                    for i in range(1000)][-lines:]

    monkeypatch.setattr(kube, "access_from_kubeconfig", lambda *a: None)
    monkeypatch.setattr(kube, "KubeClient", Cluster)
    cfg = load_stack_config("dev")
    outputs = {"kubeconfig": {}, "cluster_name": "eksbench-dev"}
    got = list(cloud_observe.cluster_logs(cfg, outputs, "resnet50-synthetic", False, tail=2, node="1"))
    assert got == ["exp-job-1-fghij: exp-job-1-fghij line 998", "exp-job-1-fghij: exp-job-1-fghij line 999"]
    assert len(list(cloud_observe.cluster_logs(cfg, outputs, "resnet50-synthetic", False))) == 400  # 200 a pod
    assert list(cloud_observe.cluster_logs(cfg, outputs, "resnet50-synthetic", False, tail=1, node="0",
                                           timestamps=True)) == [
        "exp-job-0-abcde: 2026-11-27T09:12:39.120Z exp-job-0-abcde line 999"]
    with pytest.raises(ValueError, match="nodes: node-0, node-1$"):
        cloud_observe.cluster_logs(cfg, outputs, "resnet50-synthetic", False, node="3")
