"""Preflight checks against moto (in process: boto3 honours AWS_ENDPOINT_URL)."""

from __future__ import annotations

import json

import boto3
import pytest

from bench import preflight
from bench.stack_files import load_stack_config
from tests.lifecycle.conftest import BUCKET, REGION

pytestmark = pytest.mark.local_run

CIFAR = [{"name": "c", "workload": "cifar10", "nodes": 1, "epochs": 1, "dataset": "cifar10", "timeout_minutes": 5}]


def cfg(project, **kw):
    project.write_stack(**kw)
    return load_stack_config("lc", project.dir)


def test_a_dataset_in_the_bucket_this_stack_creates_cannot_be_there_yet(project):
    c = cfg(project, experiments=CIFAR, results={})
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_datasets(c)
    assert "in the bucket this stack creates" in str(e.value) and "eksbench:datasets_uri" in str(e.value)


def test_a_dataset_without_its_manifest_is_refused(project):
    c = cfg(project, experiments=CIFAR)
    s3 = boto3.client("s3", region_name=REGION)
    s3.put_object(Bucket=BUCKET, Key="datasets/cifar10/cifar-10-batches-py/data_batch_1", Body=b"x")
    with pytest.raises(preflight.Refusal) as e:
        preflight.check_datasets(c)
    assert f"s3://{BUCKET}/datasets/cifar10/manifest.json" in str(e.value)
    assert "python -m bench data prepare cifar10 --to" in str(e.value)
    manifest = {"format": 1, "dataset": "cifar10", "layout": "cifar-batches", "files": [
        {"path": "cifar-10-batches-py/data_batch_1", "size": 1, "sha256": "0" * 64}]}
    s3.put_object(Bucket=BUCKET, Key="datasets/cifar10/manifest.json", Body=json.dumps(manifest).encode())
    assert "cifar10 prepared under" in preflight.check_datasets(c)


def test_an_instance_type_not_offered_is_refused_naming_the_alternatives(project):
    c = cfg(project)
    assert "g5.2xlarge offered" in preflight.check_offerings(c)
    bad = cfg(project, gpu_node_groups=[{"name": "p", "instance_type": "p3.16xlarge", "desired_size": 2,
                                         "max_size": 2}], **{"aws:region": "ap-south-2"})
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
