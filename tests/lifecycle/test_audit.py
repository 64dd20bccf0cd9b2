"""`bench audit` against moto (in process): a planted leftover network interface (untagged, in the
stack's VPC) and a volume tagged with the stack are both found, each with its delete command; a
clean account yields nothing; a resource of another stack or VPC is never listed."""

from __future__ import annotations

import ast
from pathlib import Path

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from bench.cloud.audit import _pages, audit, delete_command, find_leftovers

ROOT = Path(__file__).resolve().parents[2]

REGION = "us-west-2"
DEV_TAGS = [{"Key": "eksbench:project", "Value": "eksbench"}, {"Key": "eksbench:stack", "Value": "dev"}]


@pytest.fixture
def session(monkeypatch):
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", REGION)):
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield boto3.session.Session(region_name=REGION)


def tags(tag_list):
    return [{"ResourceType": "vpc", "Tags": tag_list}]


def test_a_clean_account_has_nothing_left(session):
    lines = []
    assert audit("dev", session=session, out=lines.append) == 0
    assert lines == [f"audit dev: nothing left in {REGION} (tagged with the stack or known to leak)"]


def test_finds_a_leftover_network_interface_and_a_tagged_volume(session):
    ec2 = session.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=tags(DEV_TAGS))["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    # What the VPC CNI leaves behind: an untagged interface in the stack's VPC.
    eni = ec2.create_network_interface(SubnetId=subnet, Description="aws-K8S-i-0123456789abcdef0")
    eni = eni["NetworkInterface"]["NetworkInterfaceId"]
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=200, TagSpecifications=[
        {"ResourceType": "volume", "Tags": DEV_TAGS}])["VolumeId"]
    # Neither of these is the dev stack's: another stack's volume, an interface in another VPC.
    ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1, TagSpecifications=[{"ResourceType": "volume", "Tags": [
        {"Key": "eksbench:project", "Value": "eksbench"}, {"Key": "eksbench:stack", "Value": "other"}]}])
    other_vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    other_subnet = ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.1.1.0/24")["Subnet"]["SubnetId"]
    ec2.create_network_interface(SubnetId=other_subnet)

    lines = []
    assert audit("dev", session=session, out=lines.append) == 1
    found = {x.arn: x for x in find_leftovers(session, project="eksbench", stack="dev", cluster="eksbench-dev")}
    account = session.client("sts").get_caller_identity()["Account"]
    eni_arn = f"arn:aws:ec2:{REGION}:{account}:network-interface/{eni}"
    volume_arn = f"arn:aws:ec2:{REGION}:{account}:volume/{volume}"
    assert eni_arn in found and volume_arn in found
    assert found[eni_arn].delete == f"aws ec2 delete-network-interface --region {REGION} --network-interface-id {eni}"
    assert found[volume_arn].delete == f"aws ec2 delete-volume --region {REGION} --volume-id {volume}"
    assert found[volume_arn].why == "tagged with the stack"
    assert "stack's VPC" in found[eni_arn].why
    # The VPC itself is tagged and still there; nothing of the other stack or the other VPC is listed.
    assert {x.kind for x in found.values()} == {"ec2:network-interface", "ec2:volume", "ec2:vpc"}, sorted(found)
    text = "\n".join(lines)
    assert f"audit dev: {len(found)} resource(s) left in {REGION}" in text and eni_arn in text and volume_arn in text


def test_the_clusters_log_group_and_kubernetes_volumes_are_found_untagged(session):
    session.client("logs").create_log_group(logGroupName="/aws/eks/eksbench-dev/cluster")
    volume = session.client("ec2").create_volume(AvailabilityZone=f"{REGION}a", Size=10, TagSpecifications=[
        {"ResourceType": "volume", "Tags": [{"Key": "kubernetes.io/cluster/eksbench-dev", "Value": "owned"}]}])
    found = find_leftovers(session, project="eksbench", stack="dev", cluster="eksbench-dev")
    assert sorted(x.kind for x in found) == ["ec2:volume", "logs:log-group"]
    log = [x for x in found if x.kind == "logs:log-group"][0]
    assert log.delete == f"aws logs delete-log-group --region {REGION} --log-group-name /aws/eks/eksbench-dev/cluster"
    assert volume["VolumeId"] in [x.arn.rsplit("/", 1)[-1] for x in found]


@pytest.mark.parametrize("arn, command", [
    ("arn:aws:ec2:us-west-2:123456789012:security-group/sg-0123", "aws ec2 delete-security-group --region us-west-2 "
                                                                  "--group-id sg-0123"),
    ("arn:aws:elasticloadbalancing:us-west-2:123456789012:loadbalancer/net/k8s-x/abc",
     "aws elbv2 delete-load-balancer --region us-west-2 --load-balancer-arn "
     "arn:aws:elasticloadbalancing:us-west-2:123456789012:loadbalancer/net/k8s-x/abc"),
    ("arn:aws:elasticloadbalancing:us-west-2:123456789012:loadbalancer/a1b2",
     "aws elb delete-load-balancer --region us-west-2 --load-balancer-name a1b2"),
    ("arn:aws:eks:us-west-2:123456789012:nodegroup/eksbench-dev/p3-1/uuid",
     "aws eks delete-nodegroup --region us-west-2 --cluster-name eksbench-dev --nodegroup-name p3-1"),
])
def test_delete_commands(arn, command):
    assert delete_command(arn, "us-west-2") == command


def test_an_audit_that_cannot_run_says_so_and_does_not_fail_the_destroy(monkeypatch):
    import bench.cloud.audit as a

    def refused(*args, **kwargs):
        raise RuntimeError("AccessDenied: tag:GetResources")

    monkeypatch.setattr(a, "audit", refused)
    lines = []
    assert a.audit_after_destroy("dev", out=lines.append) is True
    assert lines == ["audit dev: could not run (RuntimeError: AccessDenied: tag:GetResources); run it later: "
                     "eksbench audit dev"]


def boto_calls(path: Path) -> list[tuple[str, str, str | None, int]]:
    """(service, operation, result key or None, line) for every ``_pages(client, "op", "key")`` and
    ``<client>.get_paginator("op")`` in ``path``, the client's service read from ``X = ...client("svc")``."""
    tree = ast.parse(path.read_text())

    def made(value: ast.expr) -> ast.expr:  # ``eks = eks or boto3.client("eks")``: the client made when none is given
        return value.values[-1] if isinstance(value, ast.BoolOp) else value

    services = {node.targets[0].id: made(node.value).args[0].value for node in ast.walk(tree)
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and isinstance(made(node.value), ast.Call) and getattr(made(node.value).func, "attr", None) == "client"
                and made(node.value).args and isinstance(made(node.value).args[0], ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if getattr(node.func, "id", None) == "_pages" and isinstance(node.args[0], ast.Name):
            out.append((services[node.args[0].id], node.args[1].value, node.args[2].value, node.lineno))
        elif getattr(node.func, "attr", None) == "get_paginator" and isinstance(node.args[0], ast.Constant):
            target = node.func.value
            if isinstance(target, ast.Call) and getattr(target.func, "attr", None) == "client":
                service = target.args[0].value  # boto3.client("ec2", ...).get_paginator(...)
            else:
                service = services.get(getattr(target, "id", None), "s3")  # an s3 client passed in
            out.append((service, node.args[0].value, None, node.lineno))
    return out


def test_every_paginated_call_names_an_operation_and_result_key_of_botocores_model():
    """The tokens come from botocore's paginators; each operation must have one, and the key we read must
    be its result key (a misspelled key would read nothing from every page, silently)."""
    session = botocore.session.get_session()
    checked = []
    for path in sorted((ROOT / "bench").rglob("*.py")) + sorted((ROOT / "datasets").rglob("*.py")):
        for service, operation, key, line in boto_calls(path):
            client = session.create_client(service, region_name=REGION, aws_access_key_id="x",
                                           aws_secret_access_key="x")
            where = f"{path.relative_to(ROOT)}:{line}: {service}.{operation}"
            assert client.can_paginate(operation), f"{where} has no paginator in botocore's model"
            config = session.get_paginator_model(service).get_paginator(client.meta.method_to_api_mapping[operation])
            keys = config["result_key"] if isinstance(config["result_key"], list) else [config["result_key"]]
            assert key is None or key in keys, f"{where} reads {key!r}; the paginator's result keys are {keys}"
            checked.append(where)
    assert any("logs.describe_log_groups" in c for c in checked) and len(checked) >= 10, checked


def test_the_log_groups_are_read_past_the_first_page():
    """logs.describe_log_groups pages with nextToken (lower case); reading NextToken stops at page one."""
    logs = botocore.session.get_session().create_client("logs", region_name=REGION, aws_access_key_id="x",
                                                         aws_secret_access_key="x")
    group = "/aws/eks/eksbench-dev/cluster"
    with Stubber(logs) as stub:
        stub.add_response("describe_log_groups", {"logGroups": [{"logGroupName": "/aws/eks/eksbench-dev/a"}],
                                                  "nextToken": "page-2"}, {"logGroupNamePrefix": group})
        stub.add_response("describe_log_groups", {"logGroups": [{"logGroupName": group}]},
                          {"logGroupNamePrefix": group, "nextToken": "page-2"})
        names = [g["logGroupName"] for g in _pages(logs, "describe_log_groups", "logGroups", logGroupNamePrefix=group)]
        stub.assert_no_pending_responses()
    assert names == ["/aws/eks/eksbench-dev/a", group]


class GhostTagging:
    """The session, with a Resource Groups Tagging API that still lists what was deleted (as the real one does
    for minutes to hours: boto/boto3#3341, aws/aws-cli#4173) besides what is there."""

    def __init__(self, session, arns):
        self.session, self.arns, self.region_name = session, arns, session.region_name

    def client(self, name):
        if name != "resourcegroupstaggingapi":
            return self.session.client(name)
        client = self.session.client(name)
        stub = Stubber(client)
        stub.add_response("get_resources", {"ResourceTagMappingList": [{"ResourceARN": a} for a in self.arns]},
                          {"TagFilters": [{"Key": "eksbench:project", "Values": ["eksbench"]},
                                          {"Key": "eksbench:stack", "Values": ["dev"]}]})
        stub.activate()
        return client


def test_a_resource_the_tagging_api_still_lists_after_its_deletion_is_not_reported(session):
    ec2 = session.client("ec2")
    account = session.client("sts").get_caller_identity()["Account"]
    arn = lambda kind, ident: f"arn:aws:ec2:{REGION}:{account}:{kind}/{ident}"  # noqa: E731
    kept = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=8, TagSpecifications=[
        {"ResourceType": "volume", "Tags": DEV_TAGS}])["VolumeId"]
    deleted = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=8)["VolumeId"]
    ec2.delete_volume(VolumeId=deleted)
    image = ec2.describe_images()["Images"][0]["ImageId"]
    instance = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    ec2.terminate_instances(InstanceIds=[instance])
    ghosts = [arn("volume", kept), arn("volume", deleted), arn("instance", instance),
              arn("network-interface", "eni-0123456789abcdef0"),
              f"arn:aws:eks:{REGION}:{account}:cluster/eksbench-dev",
              f"arn:aws:sqs:{REGION}:{account}:a-kind-eksbench-cannot-describe"]
    found = find_leftovers(GhostTagging(session, ghosts), project="eksbench", stack="dev", cluster="eksbench-dev")
    assert [x.arn for x in found] == [arn("volume", kept), f"arn:aws:sqs:{REGION}:{account}:a-kind-eksbench-cannot-describe"]
