"""Preflight checks against moto (in process: boto3 honours AWS_ENDPOINT_URL)."""

from __future__ import annotations

import json

import boto3
import pytest

from bench.cloud import preflight
from core.config.fields import ConfigError
from program.stack_files import load_stack_config
from tests.lifecycle.conftest import BUCKET, REGION

pytestmark = pytest.mark.local_run

CIFAR = [{"name": "c", "workload": "cifar10", "nodes": 1, "epochs": 1, "dataset": "cifar10", "timeout_minutes": 5}]


def cfg(project, **kw):
    project.write_stack(**kw)
    return load_stack_config("lc", project.dir)


HOME = "organization/eksbench/home"


def seed_home(project, outputs: dict) -> None:
    """The fake CLI's state holds a home stack with these outputs (as `pulumi up -s home` would leave it)."""
    project.state.mkdir(parents=True, exist_ok=True)
    (project.state / "state.json").write_text(json.dumps(
        {"stacks": {HOME: {"resources": [], "outputs": outputs, "history": []}}}))


def test_a_stack_with_nowhere_to_read_datasets_from_is_refused_before_preflight(project):
    with pytest.raises(ConfigError) as e:
        cfg(project, experiments=CIFAR, results={})
    assert e.value.problems[0].startswith("results.home_stack: is required: experiments[0] trains on the prepared "
                                          "dataset 'cifar10'")


def test_datasets_are_looked_up_at_the_home_stacks_datasets_uri(project, monkeypatch):
    """check_home reads the home stack's outputs through the Automation API (here the fake CLI)."""
    for k, v in project.env().items():
        monkeypatch.setenv(k, v)
    c = cfg(project, experiments=CIFAR, results={"home_stack": HOME})
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_home(c, project.dir)
    assert f"cannot read the home stack {HOME}" in str(e.value) and "pulumi up -s home" in str(e.value)
    assert "\n" not in str(e.value)
    seed_home(project, {"bucket": BUCKET, "region": "eu-west-1"})
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_home(c, project.dir)
    assert f"that home stack is in eu-west-1, this stack in {REGION}" in str(e.value)
    home = {"bucket": BUCKET, "datasets_uri": f"s3://{BUCKET}/datasets/", "results_uri": f"s3://{BUCKET}/eksbench/",
            "ecr_repository_url": "r", "region": REGION}
    seed_home(project, home)
    note, outputs = preflight.check_home(c, project.dir)
    assert outputs == home and note == f"home stack {HOME}: results and datasets in s3://{BUCKET}/"
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_datasets(c, outputs)
    assert f"no readable s3://{BUCKET}/datasets/cifar10/manifest.json" in str(e.value)
    assert str(e.value).endswith(f"eksbench data prepare cifar10 --to s3://{BUCKET}/datasets/cifar10/")
    s3 = boto3.client("s3", region_name=REGION)
    s3.put_object(Bucket=BUCKET, Key="eksbench/lc/r1/c/summary.json", Body=b"{}")
    with pytest.raises(preflight.Refusal) as e:  # the home bucket's results are where a rerun is looked for
        preflight.check_rerun(c, project.results, False, outputs)
    assert "already has results (1 on S3 summary.json)" in str(e.value)


def test_a_dataset_without_its_manifest_is_refused(project):
    c = cfg(project, experiments=CIFAR)
    s3 = boto3.client("s3", region_name=REGION)
    s3.put_object(Bucket=BUCKET, Key="datasets/cifar10/cifar-10-batches-py/data_batch_1", Body=b"x")
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_datasets(c)
    assert f"s3://{BUCKET}/datasets/cifar10/manifest.json" in str(e.value)
    assert "eksbench data prepare cifar10 --to" in str(e.value)
    manifest = {"format": 1, "dataset": "cifar10", "layout": "cifar-batches", "files": [
        {"path": "cifar-10-batches-py/data_batch_1", "size": 1, "sha256": "0" * 64}], "file_count": 1, "total_bytes": 1}
    s3.put_object(Bucket=BUCKET, Key="datasets/cifar10/manifest.json", Body=json.dumps(manifest).encode())
    assert "cifar10 prepared under" in preflight.check_datasets(c)


def test_an_instance_type_not_offered_is_refused_naming_the_alternatives(project):
    c = cfg(project)
    assert "g5.2xlarge offered" in preflight.check_offerings(c)
    bad = cfg(project, gpu_node_groups=[{"name": "p", "instance_type": "p3.16xlarge", "desired_size": 2,
                                         "max_size": 3}], **{"aws:region": "ap-south-2"})
    offered = {o["InstanceType"] for o in boto3.client("ec2", region_name="ap-south-2")
               .describe_instance_type_offerings(LocationType="region")["InstanceTypeOfferings"]}
    if "p3.16xlarge" in offered:
        pytest.skip("moto offers p3.16xlarge in ap-south-2")
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_offerings(bad)
    assert "p3.16xlarge is not offered in ap-south-2; offered there:" in str(e.value)


def test_a_file_backend_without_passphrase_is_refused(project):
    env = project.env()
    del env["PULUMI_CONFIG_PASSPHRASE"]
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_pulumi(env)
    assert "needs PULUMI_CONFIG_PASSPHRASE" in str(e.value)
    env = project.env()
    del env["PULUMI_BACKEND_URL"]
    project.scenario = {"whoami": "fail"}
    env["FAKE_PULUMI_SCENARIO"] = json.dumps(project.scenario)
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_pulumi(env)
    assert "pulumi login" in str(e.value)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_run_whose_experiments_all_have_repeats_is_refused_unless_resume(project, monkeypatch, where):
    """Repeats leave <exp>/repeat_<k>/summary.json, one level deeper than an experiment's own summary."""
    for k, v in project.env().items():
        monkeypatch.setenv(k, v)
    c = cfg(project, results={"bucket": BUCKET})
    assert preflight.check_rerun(c, project.results, False) == "run id r1"
    if where == "local":
        summary = project.results / "lc" / "r1" / "alpha" / "repeat_2" / "summary.json"
        summary.parent.mkdir(parents=True)
        summary.write_text("{}")
    else:
        boto3.client("s3", region_name=REGION).put_object(Bucket=BUCKET, Key="eksbench/lc/r1/alpha/repeat_2/summary.json",
                                                          Body=b"{}")
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_rerun(c, project.results, False)
    assert "run 'r1' of stack lc already has results (1 " in str(e.value)
    assert preflight.check_rerun(c, project.results, True) == "run id r1 (resuming)"
