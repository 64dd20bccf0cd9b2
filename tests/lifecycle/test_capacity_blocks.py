"""A Capacity Block group against its reservation (preflight, a botocore Stubber in the real response shape: moto
5.2.1 has no DescribeCapacityReservations), and a Capacity Block experiment's clock in the watch."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

import boto3
import pytest
from botocore.stub import Stubber

from bench.cloud import capacity_blocks
from bench.errors import Refusal
from core.config.model import GpuNodeGroup

NOW = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.timezone.utc)
CR = "cr-0123456789abcdef0"


def block_group(**over) -> GpuNodeGroup:
    kw = dict(name="p5", instance_type="p5.48xlarge", capacity_type="CAPACITY_BLOCK", capacity_reservation_id=CR,
              availability_zone="us-east-1a", desired_size=2, min_size=0, max_size=2)
    return GpuNodeGroup(**{**kw, **over})


def reservation(**over) -> dict:
    """One entry of DescribeCapacityReservations' CapacityReservations, as EC2 gives a Capacity Block."""
    r = {"CapacityReservationId": CR, "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a",
         "TotalInstanceCount": 2, "AvailableInstanceCount": 2, "State": "active", "ReservationType": "capacity-block",
         "StartDate": NOW - datetime.timedelta(hours=1), "EndDate": NOW + datetime.timedelta(hours=24),
         "InstanceMatchCriteria": "targeted", "Tenancy": "default", "InstancePlatform": "Linux/UNIX"}
    return {**r, **over}


def check(group: GpuNodeGroup, answer: dict | None, deadline: float = 300, subnets: list | None = None) -> str:
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    cfg = SimpleNamespace(region="us-east-1", gpu_node_groups=(block_group(name="g5", instance_type="g5.2xlarge",
                                                                           capacity_type="ON_DEMAND",
                                                                           capacity_reservation_id=None), group))
    with Stubber(ec2) as stub:
        if answer is None:
            stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                                  f"The capacity reservation ID '{CR}' does not exist")
        else:
            stub.add_response("describe_capacity_reservations", {"CapacityReservations": [answer]},
                              {"CapacityReservationIds": [CR]})
        if subnets is not None:
            stub.add_response("describe_subnets", {"Subnets": subnets}, {"SubnetIds": [group.subnet_id]})
        return capacity_blocks.check_reservations(cfg, deadline, ec2=ec2, now=NOW)


def refusal(*args, **kw) -> str:
    with pytest.raises(Refusal) as e:
        check(*args, **kw)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_block_that_matches_its_group_passes_and_a_stack_without_one_asks_nothing():
    assert check(block_group(), reservation()) == f"Capacity Block(s) p5: {CR} active in us-east-1a until " \
                                                  "2026-12-08 12:00 UTC"
    assert capacity_blocks.check_reservations(SimpleNamespace(gpu_node_groups=()), 60) == "no Capacity Block to check"


def test_a_group_in_another_zone_or_of_another_type_than_its_block_is_refused():
    key = f"gpu_node_groups[1].capacity_reservation_id={CR}"
    assert refusal(block_group(), reservation(AvailabilityZone="us-east-1b")) == (
        f"{key}: the block is in us-east-1b, the group in us-east-1a: set gpu_node_groups[1].availability_zone to "
        "the zone us-east-1b")
    assert refusal(block_group(), reservation(InstanceType="p4d.24xlarge")) == (
        f"{key}: the block holds p4d.24xlarge, the group asks for p5.48xlarge: set gpu_node_groups[1].instance_type "
        "to p4d.24xlarge")
    subnet = block_group(availability_zone=None, subnet_id="subnet-0abc")  # an existing VPC: the subnet's zone
    assert "the group in us-east-1c: set gpu_node_groups[1].subnet_id to a subnet of us-east-1a" in refusal(
        subnet, reservation(), subnets=[{"SubnetId": "subnet-0abc", "AvailabilityZone": "us-east-1c"}])


def test_a_block_not_active_too_small_unknown_or_not_a_block_is_refused():
    key = f"gpu_node_groups[1].capacity_reservation_id={CR}"
    assert refusal(block_group(), reservation(State="scheduled", StartDate=NOW + datetime.timedelta(days=1))) == (
        f"{key}: the block is scheduled (starts 2026-12-08 12:00 UTC), not active: run while it is active, or buy a "
        "new block")
    assert "the block is expired, not active" in refusal(block_group(), reservation(State="expired"))
    assert refusal(block_group(), reservation(TotalInstanceCount=1)).endswith(
        "the block holds 1 instance(s), the group asks for desired_size 2: set gpu_node_groups[1].desired_size to 1 "
        "at most")
    assert refusal(block_group(), None).startswith(f"{key}: no such Capacity Reservation in this account")
    assert "is a reservation of type default, not a Capacity Block" in refusal(
        block_group(), reservation(ReservationType="default"))


def test_a_block_that_ends_within_the_runs_deadline_less_40_minutes_is_refused():
    ends = reservation(EndDate=NOW + datetime.timedelta(hours=5))  # EKS scales the group down at 4 h 20 min
    assert check(block_group(), ends, deadline=260).startswith("Capacity Block(s) p5")
    assert refusal(block_group(), ends, deadline=261) == (
        f"gpu_node_groups[1].capacity_reservation_id={CR}: the block ends 2026-12-07 17:00 UTC and EKS scales its "
        "group down 40 min before, 260 min from now, inside the run's deadline of 261 min: pass --deadline 260 or "
        "less, shorten or drop experiments, or use a block that ends later")


def test_preflight_checks_the_blocks_against_the_runs_deadline(monkeypatch, tmp_path):
    """The hook: preflight hands the run's --deadline (else its default) to the reservation check."""
    from bench.cloud import preflight

    ready = SimpleNamespace(cfg=SimpleNamespace(region="us-east-1", experiments=[]), plan=SimpleNamespace(
        resources=[]), home=None, default_deadline_minutes=95.0)
    seen = []
    monkeypatch.setattr(preflight, "check_config", lambda *a: ready)
    for name in ("check_cost", "check_pulumi", "check_credentials", "check_offerings", "check_datasets",
                 "check_rerun"):
        monkeypatch.setattr(preflight, name, lambda *a, **k: "ok")
    monkeypatch.setattr(preflight, "check_quotas", lambda *a: "ok")
    monkeypatch.setattr(preflight, "check_home", lambda *a: ("ok", None))
    monkeypatch.setattr(capacity_blocks, "check_reservations", lambda cfg, minutes: seen.append(minutes) or "ok")
    monkeypatch.setattr(capacity_blocks, "check_updates", lambda cfg: seen.append("updates") or "ok")
    for deadline in (None, 40.0):
        preflight.preflight("s", tmp_path, max_cost=None, results_root=tmp_path, resume=False, log=lambda _m: None,
                            deadline_minutes=deadline)
    assert seen == [95.0, "updates", 40.0, "updates"]


def node(name: str, group: str, ready: bool = True) -> dict:
    return {"metadata": {"name": name, "labels": {"eksbench.io/pool": group}},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_capacity_block_experiment_counts_as_started_once_its_nodes_are_ready(tmp_path, monkeypatch):
    """Its timeout_minutes run from its group's Ready nodes, not from the end of pulumi up: a block whose nodes take
    longer than the timeout to join no longer times the experiment out before its pods could start."""
    from bench.cloud import s3_results
    from bench.cloud.backend import CloudBackend
    from bench.cloud.watched import Watched

    groups = {"p5": block_group(), "g5": block_group(name="g5", capacity_type="ON_DEMAND")}
    experiments = [SimpleNamespace(name="a", min_nodes=2, node_group="p5"),
                   SimpleNamespace(name="b", min_nodes=1, node_group="g5")]
    cfg = SimpleNamespace(namespace="ns", run_id="r", region="us-east-1", execution="sequential",
                          experiments=experiments, node_group_for=lambda e: groups[e.node_group])
    nodes = [node("n1", "p5"), node("n2", "p5", ready=False), node("n3", "g5")]

    class Cluster:
        def pods(self, namespace, selector):
            return []

        def events(self, namespace):
            return []

        def nodes(self):
            return nodes

    monkeypatch.setattr(s3_results, "read_json", lambda *a, **k: None)
    backend = CloudBackend(stack="s", cfg=cfg, root=tmp_path, results_root=tmp_path)
    backend.pods.client = Cluster()
    backend.watched = [Watched(name="a", uri="s3://b/a/", timeout_s=60, deadline=160.0, experiment="a",
                               counted_from=100.0),
                       Watched(name="b", uri="s3://b/b/", timeout_s=60, deadline=220.0, experiment="b",
                               counted_from=100.0)]
    capacity_blocks.hold(cfg, backend.watched)
    a, b = backend.watched
    assert (a.waits_for, b.waits_for) == (("p5", 2), None)
    for w in backend.watched:  # past both deadlines, one p5 node of two Ready: neither has started
        backend._poll(w, 500.0, look_kube=True)
    assert (a.state, b.state) == ("waiting", "waiting")
    assert a.reasons[-1] == ("waiting for 2 Ready node(s) of Capacity Block group p5 (1 now); its timeout counts "
                             "from then (at most 30 min of waiting)")
    nodes[1] = node("n2", "p5")
    backend._poll(a, 600.0, look_kube=True)
    assert a.waits_for is None and (a.deadline, b.deadline) == (660.0, 720.0)  # b runs after a: it moves too
    backend._poll(a, 661.0, look_kube=False)
    assert a.state == "timeout"


def test_a_block_whose_nodes_never_join_holds_the_clock_30_minutes_at_most():
    """The hold had no end: a block whose instances never joined kept the experiment, and those after it, waiting
    for the run's whole deadline while the cluster billed."""
    from bench.cloud.watched import Watched

    a = Watched(name="a", uri="s3://b/a/", timeout_s=60, deadline=160.0, experiment="a", counted_from=100.0,
                waits_for=("p5", 2))
    b = Watched(name="b", uri="s3://b/b/", timeout_s=60, deadline=220.0, experiment="b", counted_from=100.0)
    assert capacity_blocks.held([a, b], a, True, 100.0 + 29 * 60) and capacity_blocks.held([a, b], b, True, 1800.0)
    assert not capacity_blocks.held([a, b], a, True, 100.0 + 30 * 60)
    assert not capacity_blocks.held([a, b], b, True, 100.0 + 30 * 60)


def test_one_unknown_reservation_is_named_against_its_own_group_and_a_subnet_that_cannot_be_read_is_one_line():
    """One bad id failed the whole DescribeCapacityReservations call, and every group was named as not found; a
    subnet AWS would not describe escaped preflight as a traceback."""
    other = "cr-0fedcba9876543210"
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    cfg = SimpleNamespace(region="us-east-1", gpu_node_groups=(
        block_group(name="bad", capacity_reservation_id=other), block_group()))
    with Stubber(ec2) as stub, pytest.raises(Refusal) as e:
        stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", "no")
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]},
                          {"CapacityReservationIds": [CR]})
        stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", "no",
                              expected_params={"CapacityReservationIds": [other]})
        capacity_blocks.check_reservations(cfg, 300, ec2=ec2, now=NOW)
    assert str(e.value).startswith(f"gpu_node_groups[0].capacity_reservation_id={other}: no such Capacity")
    with Stubber(ec2) as stub, pytest.raises(Refusal) as e:
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation()]},
                          {"CapacityReservationIds": [CR]})
        stub.add_client_error("describe_subnets", "UnauthorizedOperation", "not allowed")
        cfg = SimpleNamespace(region="us-east-1", gpu_node_groups=(
            block_group(availability_zone=None, subnet_id="subnet-0123"),))
        capacity_blocks.check_reservations(cfg, 300, ec2=ec2, now=NOW)
    assert str(e.value).startswith("cannot read subnet subnet-0123 of Capacity Block group p5 (ClientError")


def live_block(desired: int, **template) -> SimpleNamespace:
    """Under moto: the stack's cluster with Capacity Block group p5 at ``desired`` nodes on a launch template of
    ``template`` (EC2's LaunchTemplateData); the stack's config."""
    from core.contract.names import cluster_name

    cfg = SimpleNamespace(region="us-east-1", project="eksbench", stack="cb", storage=SimpleNamespace(kind="efs"),
                          gpu_node_groups=(block_group(),))
    ec2, eks = boto3.client("ec2", region_name="us-east-1"), boto3.client("eks", region_name="us-east-1")
    data = {"InstanceType": "p5.48xlarge", "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {
        "VolumeSize": 200}}], "CapacityReservationSpecification": {"CapacityReservationTarget": {
            "CapacityReservationId": CR}}, **template}
    lt = ec2.create_launch_template(LaunchTemplateName="p5-lt", LaunchTemplateData=data)["LaunchTemplate"]
    name = cluster_name(cfg.project, cfg.stack)
    role = "arn:aws:iam::123456789012:role/r"
    eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": ["subnet-1"]})
    eks.create_nodegroup(clusterName=name, nodegroupName="p5-20261207", nodeRole=role, subnets=["subnet-1"],
                         capacityType="CAPACITY_BLOCK", tags={"eksbench:node-group": "p5"},
                         scalingConfig={"minSize": 0, "desiredSize": desired, "maxSize": 2},
                         launchTemplate={"id": lt["LaunchTemplateId"], "version": "1"})
    return cfg


@pytest.fixture
def moto_aws(monkeypatch):
    from moto import mock_aws

    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


def test_a_template_change_of_a_capacity_block_group_with_nodes_is_refused(moto_aws):
    """EKS updates a Capacity Block group only at desired size 0: a run that would change its launch template while
    it has nodes is refused in one line naming the group, the change and how to scale it to 0."""
    cfg = live_block(2, BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 100}}])
    with pytest.raises(Refusal) as e:
        capacity_blocks.check_updates(cfg)
    line = str(e.value)
    assert line.startswith("gpu_node_groups[0] (p5): this run changes the launch template of Capacity Block node "
                           "group p5-20261207 (disk size (GiB): 100 -> 200), and EKS updates such a group only at "
                           "desired size 0 (it has 2): scale it to 0 first (aws eks update-nodegroup-config "
                           "--cluster-name ") and "\n" not in line


def test_an_unchanged_template_a_group_at_zero_and_a_stack_not_up_pass(moto_aws):
    assert capacity_blocks.check_updates(live_block(2)).endswith("no launch template change at size > 0")
    cfg = SimpleNamespace(region="us-east-1", project="eksbench", stack="none", storage=SimpleNamespace(kind="efs"),
                          gpu_node_groups=(block_group(),))
    assert capacity_blocks.check_updates(cfg).startswith("Capacity Block group(s) p5")  # no cluster yet


def test_a_template_change_of_a_capacity_block_group_at_zero_passes(moto_aws):
    assert capacity_blocks.check_updates(live_block(0, InstanceType="p4d.24xlarge")).startswith(
        "Capacity Block group(s) p5")
