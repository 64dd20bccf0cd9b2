"""``bench run`` audits what its destroy left behind (bench/cloud/audit.py) against the moto server: a clean
account prints "nothing left" and keeps exit 0; a leftover tagged with the stack is named with its
delete command and makes the run exit 1."""

from __future__ import annotations

import boto3
import pytest

from tests.lifecycle.conftest import REGION
from tests.lifecycle.test_cloud_run import ok_scenario

pytestmark = pytest.mark.local_run


def test_a_clean_destroy_prints_the_audit_and_exits_0(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    done = project.run(stack)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"audit {stack}: nothing left in {REGION}" in done.stdout, done.stdout


def test_a_leftover_after_destroy_is_named_and_makes_the_run_exit_1(project):
    stack = project.write_stack()
    volume = boto3.client("ec2", region_name=REGION).create_volume(
        AvailabilityZone=f"{REGION}a", Size=200, TagSpecifications=[{"ResourceType": "volume", "Tags": [
            {"Key": "eksbench:project", "Value": "eksbench"}, {"Key": "eksbench:stack", "Value": stack}]}])["VolumeId"]
    project.scenario = ok_scenario(project)
    done = project.run(stack)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"audit {stack}: 1 resource(s) left in {REGION}" in done.stdout, done.stdout
    assert f"aws ec2 delete-volume --region {REGION} --volume-id {volume}" in done.stdout
