"""The offline plan knows the AWS regions: under the mock engine any name would plan (invented zones, invented
offers), so an unknown region is refused by name, with the ones botocore's endpoint data knows."""

from __future__ import annotations

import copy

import pytest

from core.config.fields import ConfigError
from program.offline import evaluate_config
from program.validation import known_regions
from tests.program.test_program import DEV


def dev_in(region: str) -> dict:
    config = copy.deepcopy(DEV)
    config["aws:region"] = region
    config["eksbench:network"] = {k: v for k, v in config["eksbench:network"].items() if k != "azs"}
    return config


def test_an_unknown_region_is_refused_naming_it_and_the_known_ones():
    with pytest.raises(ConfigError) as e:
        evaluate_config("dev", dev_in("mars-east-1"))
    [line] = [p for p in e.value.problems if p.startswith("aws:region=")]
    assert line.startswith('aws:region="mars-east-1": is not an AWS region with EKS in botocore\'s endpoint data')
    assert "us-west-2" in line and "eu-central-1" in line and line.endswith('e.g. "us-west-2"')


def test_the_known_regions_are_botocores_and_a_real_one_plans():
    known = known_regions()
    assert {"us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1", "cn-north-1", "us-gov-west-1"} <= known
    assert "mars-east-1" not in known
    plan = evaluate_config("dev", dev_in("us-east-1"))
    assert plan.outputs["region"] == "us-east-1"
