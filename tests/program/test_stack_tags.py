"""Every AWS resource of both example stacks carries the stack's tags, and so does what EC2 creates from
the node groups' launch templates: `bench audit` finds leftovers by these tags (bench/cloud/audit.py)."""

from __future__ import annotations

import importlib
import inspect

import pulumi_aws as aws
import pytest

from program.offline import evaluate, evaluate_config
from tests.program.test_program import P5_FILLED

STACK_TAGS = {"dev": {"eksbench:project": "eksbench", "eksbench:stack": "dev"},
              "p5-fsx": {"eksbench:project": "eksbench", "eksbench:stack": "p5-fsx"}}


@pytest.fixture(scope="module", params=["dev", "p5-fsx"])
def plan(request):
    return request.param, evaluate("dev") if request.param == "dev" else evaluate_config("p5-fsx", P5_FILLED)


def takes_tags(type_token: str) -> bool:
    """Whether pulumi-aws' resource class of ``type_token`` ("aws:ec2/vpc:Vpc") has a ``tags`` input."""
    module, cls = type_token.split(":")[1].split("/")[0], type_token.split(":")[2]
    package = aws if module == "index" else importlib.import_module(f"pulumi_aws.{module}")
    return "tags" in inspect.signature(getattr(package, cls)._internal_init).parameters


def test_every_taggable_aws_resource_carries_the_stack_tags(plan):
    stack, p = plan
    taggable = [r for r in p.resources if r["type"].startswith("aws:") and takes_tags(r["type"])]
    assert len(taggable) > 20
    untagged = [f"{r['type']} {r['name']}" for r in taggable
                if not STACK_TAGS[stack].items() <= dict(r["inputs"].get("tags") or {}).items()]
    assert not untagged, untagged
    cluster = [r for r in p.resources if r["type"] == "eks:index:Cluster"]
    assert all(STACK_TAGS[stack].items() <= r["inputs"]["tags"].items() for r in cluster)


def test_launch_templates_tag_instances_volumes_and_network_interfaces(plan):
    stack, p = plan
    templates = [r for r in p.resources if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"]
    assert len(templates) >= 2
    for t in templates:
        specs = {s["resourceType"]: s["tags"] for s in t["inputs"]["tagSpecifications"]}
        assert set(specs) == {"instance", "volume", "network-interface"}, t["name"]
        assert all(STACK_TAGS[stack].items() <= tags.items() for tags in specs.values()), t["name"]
