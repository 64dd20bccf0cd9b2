"""`bench audit` against moto (in process): a planted leftover network interface (untagged, in the
stack's VPC) and a volume tagged with the stack are both found, each with its delete command; a
clean account yields nothing; a resource of another stack or VPC is never listed."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from bench.cloud.audit import audit, delete_command, find_leftovers

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
                     "python -m bench audit dev"]
