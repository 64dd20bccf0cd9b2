"""``bench run`` writes the run's timeline (bench/results/timeline.py) beside its results, here and on S3, against
the fake Pulumi CLI (driven by the real Automation API, its engine events included) and moto."""

from __future__ import annotations

import json

import boto3
import pytest

from bench.results import timeline as T
from core.catalog import aws as catalog
from tests.lifecycle.conftest import BUCKET, REGION
from tests.lifecycle.test_cloud_run import ok_scenario

pytestmark = pytest.mark.local_run

# What `pulumi up` makes, by eksbench component (the fake CLI sends an engine event per resource).
RESOURCES = [
    ["eksbench:infra:Network", "network", None],
    ["aws:ec2/vpc:Vpc", "network-vpc", "eksbench:infra:Network"],
    ["eksbench:infra:EksCluster", "cluster", None],
    ["eks:index:Cluster", "cluster-eks", "eksbench:infra:EksCluster"],
    ["eksbench:infra:NodeGroup", "gpu-g5", None],
    ["aws:eks/nodeGroup:NodeGroup", "gpu-g5-ng", "eksbench:infra:NodeGroup"],
    ["eksbench:infra:EfsStorage", "storage", None],
    ["aws:efs/fileSystem:FileSystem", "storage-fs", "eksbench:infra:EfsStorage"],
    ["eksbench:workloads:ExperimentSuite", "experiments", None],
    ["kubernetes:batch/v1:Job", "experiments-job", "eksbench:workloads:ExperimentSuite"],
]


def test_the_run_writes_an_ordered_timeline_with_the_audit_here_and_on_s3(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project, resources=RESOURCES)
    done = project.run(stack)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((project.results / stack / "r1" / T.FILE).read_text())
    names = [p["name"] for p in doc["phases"]]
    for name in (T.PREFLIGHT, T.UP, T.UP_CLUSTER, T.UP_NODE_GROUPS, T.UP_STORAGE, T.PODS_STARTED, T.FIRST_STEP,
                 T.TRAINING, T.TEARDOWN, T.AUDIT):
        assert name in names, names
    starts = [p["start_s"] for p in doc["phases"]]
    assert starts == sorted(starts) and all(p["end_s"] >= p["start_s"] for p in doc["phases"])
    at = {p["name"]: p for p in doc["phases"]}
    # the run's order: preflight, up (cluster before the node groups, both inside up), training, teardown, audit
    assert at[T.PREFLIGHT]["end_s"] <= at[T.UP]["start_s"] <= at[T.UP_CLUSTER]["start_s"]
    assert at[T.UP_CLUSTER]["end_s"] <= at[T.UP_NODE_GROUPS]["start_s"] <= at[T.UP]["end_s"]
    # Training Jobs skip Pulumi's await, so their pods may step before `pulumi up` returns (a CI run saw the
    # first step 35 ms before up's end); they cannot before their node groups exist.
    assert at[T.UP_NODE_GROUPS]["end_s"] <= at[T.TRAINING]["start_s"] <= at[T.TRAINING]["end_s"]
    assert at[T.UP]["end_s"] <= at[T.TEARDOWN]["start_s"] and at[T.TRAINING]["end_s"] <= at[T.TEARDOWN]["start_s"]
    assert at[T.TEARDOWN]["end_s"] <= at[T.AUDIT]["start_s"]
    assert doc["audit"]["clean"] is True
    assert any(f"audit {stack}: nothing left in {REGION}" in line for line in doc["audit"]["lines"])
    assert {e["name"] for e in doc["experiments"]} == {"alpha", "beta"}
    # 2 GPU nodes (the stack's desired size) idle from the node groups' creation to the teardown's end,
    # except while an experiment stepped: the figure is the pure function's on this very document
    assert doc["gpu_nodes"] == 2
    assert doc["figures"]["idle_gpu_node_minutes"] == T.idle_gpu_node_minutes(doc) > 0
    assert doc["figures"]["minutes_to_first_step"] == T.minutes_to_first_step(doc) > 0
    assert "GPU node-minutes billed while no experiment was stepping" in done.stdout
    body = boto3.client("s3", region_name=REGION).get_object(Bucket=BUCKET, Key=f"eksbench/{stack}/r1/{T.FILE}")["Body"]
    assert json.loads(body.read()) == doc


def test_a_failed_up_still_writes_what_happened(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project, up="fail", resources=RESOURCES)
    done = project.run(stack)
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads((project.results / stack / "r1" / T.FILE).read_text())
    names = [p["name"] for p in doc["phases"]]
    assert names[:2] == [T.PREFLIGHT, T.UP] and T.TEARDOWN in names and T.TRAINING not in names
    assert doc["figures"]["minutes_to_first_step"] is None


def test_up_refreshes_so_a_rerun_after_autostop_or_keep_gets_its_gpu_nodes_back(project):
    # autostop and --keep set the GPU groups to zero through the EKS API, outside Pulumi's state; only an
    # up that reads the resources back first (`pulumi up --refresh`) sees the difference and restores them
    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    done = project.run(stack)
    assert done.returncode == 0, done.stdout + done.stderr
    up = [c for c in project.commands() if c[:1] == ["up"]]
    assert len(up) == 1 and "--refresh" in up[0], up


def test_keep_records_its_scale_down_as_the_teardown_and_says_what_still_bills(project):
    stack = project.write_stack()
    eks = boto3.client("eks", region_name=REGION)
    role = "arn:aws:iam::123456789012:role/eks"
    eks.create_cluster(name="eksbench-lc", roleArn=role, resourcesVpcConfig={"subnetIds": []})
    for ng in ("system-ng", "gpu-g5-ng"):
        eks.create_nodegroup(clusterName="eksbench-lc", nodegroupName=ng, nodeRole=role, subnets=["subnet-1"],
                             scalingConfig={"minSize": 0, "desiredSize": 2, "maxSize": 2})
    project.scenario = ok_scenario(project, outputs=project.outputs(hourly_cost_after_autostop_usd=0.34))
    done = project.run(stack, "--keep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (f"--keep: the stack stays up (about $0.34/h, system nodes at {catalog.price_label(REGION)}, the rest at "
            f"{catalog.OTHER_PRICES}: control plane") in done.stdout
    doc = json.loads((project.results / stack / "r1" / T.FILE).read_text())
    names = [p["name"] for p in doc["phases"]]
    assert names[-1] == T.TEARDOWN and T.AUDIT not in names and doc["audit"]["clean"] is None


def test_a_run_whose_output_reader_went_away_says_so_in_its_timeline(tmp_path):
    """The record a cloud run writes here and beside its results keeps why its output stopped (``output``)."""
    from types import SimpleNamespace

    from bench.cloud.run import _write_timeline
    from core.contract.results_location import ResultsLocation

    run = ResultsLocation(BUCKET, "eksbench", "lc", "r1")
    recorder = T.Recorder(stack="lc", run_id="r1", gpu_nodes=2, gpu_hourly_usd=1.0)
    put = []
    backend = SimpleNamespace(outputs={"results_bucket": BUCKET}, run_results=run, results_root=tmp_path,
                              s3=SimpleNamespace(put_object=lambda **kw: put.append(kw)))
    note = "output reader closed at 2026-11-28T04:24:56Z; the run went on, its output went nowhere from then on"
    _write_timeline(recorder, backend, None, output_note=note)
    doc = json.loads((run.local_dir(tmp_path) / T.FILE).read_text())
    assert doc["output"] == note and json.loads(put[0]["Body"]) == doc


def test_a_timeline_that_cannot_be_written_leaves_the_previous_one_whole(tmp_path, capsys):
    """A run's record on a disk that fills: the previous timeline.json stays whole, with a warning. Before: it was
    truncated first, then written as far as the disk allowed."""
    from bench.cloud import run_timeline
    from core.contract.results_location import ResultsLocation
    from tests.support.closed_output import file_size_limit

    run = ResultsLocation(BUCKET, "eksbench", "lc", "r1")
    local = run.local_dir(tmp_path) / T.FILE
    local.parent.mkdir(parents=True)
    local.write_text('{"version": 1}')
    recorder = T.Recorder(stack="lc", run_id="r1", gpu_nodes=2, gpu_hourly_usd=1.0)
    with file_size_limit(64):
        assert run_timeline.write(recorder.document(), run=run, results_root=tmp_path, bucket=None, s3=None) == []
    assert local.read_text() == '{"version": 1}'
    assert sorted(p.name for p in local.parent.iterdir()) == [T.FILE]
    assert f"warning: could not write {local}: [Errno 27] File too large" in capsys.readouterr().err


def test_the_timeline_waits_for_no_node_of_an_autoscaled_group_at_up():
    """An autoscaled group is created at 0 nodes: counting its desired_size made "nodes ready" wait for nodes up
    never boots, or record the autoscaler's scale-up during the experiment as the groups' creation."""
    from types import SimpleNamespace

    from bench.cloud.run_timeline import recorder

    groups = (SimpleNamespace(desired_size=2, autoscale=False), SimpleNamespace(desired_size=4, autoscale=True))
    ready = SimpleNamespace(cfg=SimpleNamespace(run_id="r1", gpu_node_groups=groups), plan=None, prices=None)
    assert recorder("lc", ready, started=0.0).gpu_nodes == 2
