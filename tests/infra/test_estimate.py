"""Cost and provisioning-time estimates: pure functions over the config and the graph."""

import pytest

from core.config.shape import parse_stack_config
import copy

from core.catalog import aws as catalog
from infra.cluster.estimate import Node, critical_path, hourly_cost, sweep_idle
from infra.cluster.offerings import choose_azs, usable_zones
from infra.network.subnets import subnet_plan
from tests.core.examples import GOOD


def node(urn, typ="x", deps=(), parent="", custom=True, skip=False):
    return Node(urn=urn, type=typ, parent=parent, dependencies=tuple(deps), custom=custom, skip_await=skip)


def test_critical_path_takes_the_longest_chain():
    nodes = [node("vpc"), node("cluster", "eks:index:Cluster", ["vpc"]),
             node("fsx", "aws:fsx/lustreFileSystem:LustreFileSystem", ["vpc"]),
             node("mng", "aws:eks/nodeGroup:NodeGroup", ["cluster"]),
             node("job", "kubernetes:batch/v1:Job", ["mng", "fsx"])]
    minutes, path = critical_path(nodes)
    assert minutes == pytest.approx(0.05 + 12 + 4 + 2)
    assert [n.urn for n in path] == ["vpc", "cluster", "mng", "job"]


def test_dependency_on_a_component_waits_for_all_its_children():
    nodes = [node("comp", "eksbench:infra:X", custom=False), node("slow", "eks:index:Cluster", parent="comp"),
             node("fast", parent="comp"), node("after", deps=["comp"])]
    minutes, path = critical_path(nodes)
    assert [n.urn for n in path] == ["slow", "after"] and minutes == pytest.approx(12.05)


def test_equally_long_paths_give_one_answer_whatever_the_registration_order():
    """The plan's critical path names the same resources on every run, though Pulumi registers them in any order."""
    nodes = [node("bucket"), node("ownership", deps=["bucket"]), node("public-block", deps=["bucket"]),
             node("policy", deps=["ownership"]), node("versioning", deps=["public-block"])]
    answers = {tuple(n.urn for n in critical_path(order)[1]) for order in (nodes, nodes[::-1], nodes[1:] + nodes[:1])}
    assert answers == {("bucket", "ownership", "policy")}


def test_skipped_await_jobs_cost_an_api_call_only():
    minutes, _ = critical_path([node("job", "kubernetes:batch/v1:Job", skip=True)])
    assert minutes == pytest.approx(0.05)


def test_a_sequential_node_sweep_leaves_the_nodes_it_does_not_use_idle():
    """nodes [1, 2, 4] x repeats 3 on a 4-node group: 9 runs bill 36 node-hours and use 21 (42% idle)."""
    raw = copy.deepcopy(GOOD)
    raw["gpu_node_groups"] = [{"name": "p5", "instance_type": "p5.48xlarge", "max_size": 4, "efa": True}]
    raw["execution"] = "sequential"
    raw["experiments"] = [{"name": "resnet50", "nodes": [1, 2, 4], "gpus_per_node": 8, "repeats": 3}]
    [row] = sweep_idle(parse_stack_config(raw, project="eksbench", stack="t", region="us-west-2"))
    price = catalog.usd_per_hour("p5.48xlarge", "us-west-2")  # the stack's region's price: $55.04/h
    assert (row["runs"], row["billed_node_hours"], row["used_node_hours"]) == (9, 36, 21)
    assert row["idle_share"] == pytest.approx(15 / 36, abs=1e-4)
    assert (row["billed_usd"], row["idle_usd"]) == (pytest.approx(36 * price), pytest.approx(15 * price))
    raw["gpu_node_groups"][0]["instance_type"] = "p5e.48xlarge"  # no price in us-west-2: no dollars, not another's
    [row] = sweep_idle(parse_stack_config(raw, project="eksbench", stack="t", region="us-west-2"))
    assert (row["billed_node_hours"], row["billed_usd"], row["idle_usd"]) == (36, None, None)


def test_hourly_cost_adds_nodes_control_plane_and_nat():
    items = hourly_cost(parse_stack_config(GOOD, project="eksbench", stack="t", region="us-west-2"), nat_gateways=1, today="2026-11-22")
    assert sum(items.values()) == pytest.approx(2 * 24.48 + 2 * 0.096 + 0.10 + 0.045)


def test_subnet_plan_gives_disjoint_private_and_public_blocks():
    pairs = subnet_plan("10.0.0.0/16", ["a", "b", "c"])
    assert [p.private_cidr for p in pairs] == ["10.0.0.0/19", "10.0.32.0/19", "10.0.64.0/19"]
    assert [p.public_cidr for p in pairs] == ["10.0.128.0/22", "10.0.132.0/22", "10.0.136.0/22"]


def test_choose_azs_prefers_zones_offering_the_gpu_type():
    offered = {"p3.16xlarge": {"r-b", "r-d"}}
    assert choose_azs(["r-a", "r-b", "r-c", "r-d"], offered, ["p3.16xlarge"], 2) == ["r-b", "r-d"]
    assert choose_azs(["r-a", "r-b", "r-c"], offered, ["p3.16xlarge"], 3) == ["r-a", "r-b", "r-c"]


def test_zones_where_eks_has_no_control_plane_are_dropped_by_zone_id():
    names = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
    ids = ["use1-az6", "use1-az1", "use1-az3", "use1-az2"]
    assert usable_zones(names, ids) == {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1", "us-east-1d": "use1-az2"}
