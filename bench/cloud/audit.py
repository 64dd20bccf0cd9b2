"""What the stack left behind in AWS, and how to delete each thing.

After ``pulumi destroy`` nothing should bill. Two kinds of leftovers are looked for:

- Everything still tagged with the stack (``eksbench:project`` and ``eksbench:stack``, which the
  program puts on every AWS resource and, through the launch templates, on the instances,
  volumes and network interfaces EC2 creates; ``tests/program/test_stack_tags.py`` holds that),
  through the Resource Groups Tagging API (``GetResources`` with ``TagFilters``). That API keeps
  listing deleted resources for minutes to hours, so each ARN of a kind in ``DESCRIBE`` is confirmed
  with its own service's describe call first (``still_there``); other kinds are reported as found.
- What is known to leak untagged (pulumi/pulumi-eks#1226, eksctl-io/eksctl#5632,
  skypilot-org/skypilot#3688): in the stack's VPC (while it still exists) network interfaces,
  security groups other than ``default``, and load balancers (both ELB APIs); EBS volumes that
  Kubernetes made for the cluster (tag ``kubernetes.io/cluster/<cluster>``, the EBS CSI
  driver's and the in-tree provisioner's); and the control-plane log group
  ``/aws/eks/<cluster>/cluster``, which EKS recreates if a log line arrives after destroy.

Each leftover comes with its ARN and the AWS CLI command that deletes it. Exit 1 if anything is
left, 0 if nothing, 2 when the audit could not run (credentials, config).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Callable, Iterator

from core.catalog.aws import credentials_problem
from core.contract.names import cluster_name


@dataclass(frozen=True)
class Leftover:
    arn: str
    kind: str  # e.g. "ec2:network-interface"
    why: str  # "tagged with the stack" or what found it
    delete: str  # the AWS CLI command that removes it


def delete_command(arn: str, region: str) -> str:
    """The AWS CLI command that deletes the resource ``arn`` (ARN formats: AWS General Reference,
    "Amazon Resource Names"); a pointer to the service where no single command does it."""
    parts = arn.split(":", 5)
    service, resource = (parts[2], parts[5]) if len(parts) == 6 else ("", arn)
    kind, _, ident = resource.partition("/")
    r = f"--region {region}"
    ec2 = {"network-interface": f"aws ec2 delete-network-interface {r} --network-interface-id {ident}",
           "security-group": f"aws ec2 delete-security-group {r} --group-id {ident}",
           "volume": f"aws ec2 delete-volume {r} --volume-id {ident}",
           "instance": f"aws ec2 terminate-instances {r} --instance-ids {ident}",
           "vpc": f"aws ec2 delete-vpc {r} --vpc-id {ident}",
           "subnet": f"aws ec2 delete-subnet {r} --subnet-id {ident}",
           "natgateway": f"aws ec2 delete-nat-gateway {r} --nat-gateway-id {ident}",
           "elastic-ip": f"aws ec2 release-address {r} --allocation-id {ident}",
           "internet-gateway": f"aws ec2 delete-internet-gateway {r} --internet-gateway-id {ident}",
           "route-table": f"aws ec2 delete-route-table {r} --route-table-id {ident}",
           "launch-template": f"aws ec2 delete-launch-template {r} --launch-template-id {ident}",
           "vpc-endpoint": f"aws ec2 delete-vpc-endpoints {r} --vpc-endpoint-ids {ident}",
           "placement-group": f"aws ec2 delete-placement-group {r} --group-name {ident}"}
    if service == "ec2" and kind in ec2:
        return ec2[kind]
    if service == "elasticloadbalancing":
        if kind == "loadbalancer" and ident.startswith(("app/", "net/", "gwy/")):
            return f"aws elbv2 delete-load-balancer {r} --load-balancer-arn {arn}"
        if kind == "loadbalancer":
            return f"aws elb delete-load-balancer {r} --load-balancer-name {ident}"
        if kind == "targetgroup":
            return f"aws elbv2 delete-target-group {r} --target-group-arn {arn}"
    if service == "logs" and resource.startswith("log-group:"):
        name = resource[len("log-group:"):].removesuffix(":*")
        return f"aws logs delete-log-group {r} --log-group-name {name}"
    if service == "eks" and kind == "cluster":
        return f"aws eks delete-cluster {r} --name {ident}"
    if service == "eks" and kind == "nodegroup":
        cluster, group = ident.split("/")[:2]
        return f"aws eks delete-nodegroup {r} --cluster-name {cluster} --nodegroup-name {group}"
    if service == "elasticfilesystem" and kind == "file-system":
        return f"aws efs delete-file-system {r} --file-system-id {ident}"
    if service == "fsx" and kind == "file-system":
        return f"aws fsx delete-file-system {r} --file-system-id {ident}"
    if service == "iam" and kind == "role":
        role = ident.rsplit("/", 1)[-1]
        return f"aws iam delete-role --role-name {role} (after delete-role-policy for each inline policy)"
    return f"no single command: delete it in the {service or 'AWS'} console or CLI ({arn})"


# How each kind the tagging API returns is confirmed with its own service, which answers for now: the
# Resource Groups Tagging API keeps returning deleted resources for a while (boto/boto3#3341: instances
# for hours after termination; aws/aws-cli#4173: volumes 20 minutes after deletion; aws/aws-sdk#302).
# (service, resource type) -> (client, operation, its arguments for the resource's id, the list in the
# answer, the states that mean gone). A "NotFound"-style error code means gone too.
GONE_STATES = ("terminated", "shutting-down", "deleted", "deleting", "DELETED", "DELETING", "released")
DESCRIBE: dict[tuple[str, str], tuple[str, str, Callable[[str], dict], str, str | None]] = {
    ("ec2", "instance"): ("ec2", "describe_instances", lambda i: {"InstanceIds": [i]}, "Reservations", "State.Name"),
    ("ec2", "volume"): ("ec2", "describe_volumes", lambda i: {"VolumeIds": [i]}, "Volumes", "State"),
    ("ec2", "network-interface"): ("ec2", "describe_network_interfaces", lambda i: {"NetworkInterfaceIds": [i]},
                                   "NetworkInterfaces", "Status"),
    ("ec2", "security-group"): ("ec2", "describe_security_groups", lambda i: {"GroupIds": [i]}, "SecurityGroups", None),
    ("ec2", "launch-template"): ("ec2", "describe_launch_templates", lambda i: {"LaunchTemplateIds": [i]},
                                 "LaunchTemplates", None),
    ("ec2", "vpc"): ("ec2", "describe_vpcs", lambda i: {"VpcIds": [i]}, "Vpcs", None),
    ("ec2", "subnet"): ("ec2", "describe_subnets", lambda i: {"SubnetIds": [i]}, "Subnets", None),
    ("ec2", "natgateway"): ("ec2", "describe_nat_gateways", lambda i: {"NatGatewayIds": [i]}, "NatGateways", "State"),
    ("ec2", "internet-gateway"): ("ec2", "describe_internet_gateways", lambda i: {"InternetGatewayIds": [i]},
                                  "InternetGateways", None),
    ("ec2", "route-table"): ("ec2", "describe_route_tables", lambda i: {"RouteTableIds": [i]}, "RouteTables", None),
    ("ec2", "elastic-ip"): ("ec2", "describe_addresses", lambda i: {"AllocationIds": [i]}, "Addresses", None),
    ("ec2", "vpc-endpoint"): ("ec2", "describe_vpc_endpoints", lambda i: {"VpcEndpointIds": [i]}, "VpcEndpoints",
                              "State"),
    ("eks", "cluster"): ("eks", "describe_cluster", lambda i: {"name": i}, "cluster", "status"),
    ("eks", "nodegroup"): ("eks", "describe_nodegroup",
                           lambda i: {"clusterName": i.split("/")[0], "nodegroupName": i.split("/")[1]},
                           "nodegroup", "status"),
    ("elasticfilesystem", "file-system"): ("efs", "describe_file_systems", lambda i: {"FileSystemId": i},
                                           "FileSystems", "LifeCycleState"),
    ("fsx", "file-system"): ("fsx", "describe_file_systems", lambda i: {"FileSystemIds": [i]}, "FileSystems",
                             "Lifecycle"),
}


def _state(item: Any, path: str | None) -> Any:
    for key in (path or "").split("."):
        item = item.get(key) if key and isinstance(item, dict) else item
    return item


def still_there(session: Any, arn: str, clients: dict[str, Any] | None = None) -> bool:
    """Whether the resource ``arn`` exists now, by its own service's describe call; True where eksbench has
    no such call for its kind (it is reported, as found) or the call fails for another reason than absence."""
    parts = arn.split(":", 5)
    if len(parts) != 6:
        return True
    kind, _, ident = parts[5].partition("/")
    how = DESCRIBE.get((parts[2], kind))
    if how is None or not ident:
        return True
    service, operation, args, key, state = how
    clients = clients if clients is not None else {}
    if service not in clients:
        clients[service] = session.client(service)
    client = clients[service]
    try:
        answer = getattr(client, operation)(**args(ident))
    except Exception as e:  # noqa: BLE001 - botocore's ClientError: absent, or no permission to look
        code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
        return not ("NotFound" in code or code in ("ResourceNotFoundException", "FileSystemNotFound"))
    found = answer.get(key)
    items = found if isinstance(found, list) else [found] if found else []
    if key == "Reservations":
        items = [i for r in items for i in r.get("Instances") or []]
    return any(_state(i, state) not in GONE_STATES for i in items)


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> list:
    """Every ``key`` item of every page, through botocore's own paginator for ``operation``: its tokens
    come from the service model (``logs`` calls it nextToken, the tagging API PaginationToken, ELB Marker
    and NextMarker), never from us."""
    return [item for page in client.get_paginator(operation).paginate(**kwargs) for item in page.get(key) or []]


# What a leftover finder yields: (ARN, kind, why it is the stack's), the first finder of an ARN naming it.
Found = Iterator[tuple[str, str, str]]


def find_leftovers(session: Any, *, project: str, stack: str, cluster: str,
                   vpc_id: str | None = None) -> list[Leftover]:
    """Every leftover of the stack, tagged or of a kind known to leak; ``session``: a boto3 Session in
    the stack's region. ``vpc_id``: the stack's VPC where known (an existing VPC); else the VPC tagged
    with the stack, if it still exists."""
    region = session.region_name
    account = session.client("sts").get_caller_identity()["Account"]
    ec2 = session.client("ec2")
    found: dict[str, Leftover] = {}
    for arn, kind, why in chain(_tagged(session, project=project, stack=stack),
                                _in_stack_vpcs(session, ec2, project=project, stack=stack, cluster=cluster,
                                               vpc_id=vpc_id, account=account),
                                _cluster_volumes(session, ec2, cluster=cluster, account=account),
                                _cluster_log_group(session, cluster=cluster, account=account)):
        found.setdefault(arn, Leftover(arn=arn, kind=kind, why=why, delete=delete_command(arn, region)))
    return sorted(found.values(), key=lambda x: (x.kind, x.arn))


def _ec2_arn(session: Any, account: str, kind: str, ident: str) -> str:
    """The ARN of an EC2 resource of ``kind`` (network-interface, security-group, volume) in the session's region."""
    return f"arn:aws:ec2:{session.region_name}:{account}:{kind}/{ident}"


def _tagged(session: Any, *, project: str, stack: str) -> Found:
    """What the tagging API lists with the stack's tags and its own service still has."""
    tagging = session.client("resourcegroupstaggingapi")
    filters = [{"Key": "eksbench:project", "Values": [project]}, {"Key": "eksbench:stack", "Values": [stack]}]
    clients: dict[str, Any] = {}
    for r in _pages(tagging, "get_resources", "ResourceTagMappingList", TagFilters=filters):
        arn = r["ResourceARN"]
        if not still_there(session, arn, clients):  # the tagging API still lists what was just deleted
            continue
        parts = arn.split(":", 5)
        yield arn, f"{parts[2]}:{parts[5].split('/')[0]}" if len(parts) == 6 else "?", "tagged with the stack"


def _ours(item: dict, name: str, *, cluster: str, vpc_id: str | None) -> bool:
    """In a VPC of our own everything is ours; in an existing one (``vpc_id``) only what names the cluster: the VPC
    CNI tags its ENIs cluster.k8s.amazonaws.com/name (aws/amazon-vpc-cni-k8s pkg/awsutils), EKS describes its
    control-plane ENIs "Amazon EKS <cluster>" and tags its cluster security group aws:eks:cluster-name."""
    tags = {t["Key"]: t["Value"] for t in item.get("TagSet") or item.get("Tags") or []}
    return (not vpc_id or cluster in name
            or cluster in (tags.get("cluster.k8s.amazonaws.com/name"), tags.get("aws:eks:cluster-name")))


def _in_stack_vpcs(session: Any, ec2: Any, *, project: str, stack: str, cluster: str, vpc_id: str | None,
                   account: str) -> Found:
    """The network interfaces and security groups (not ``default``: it goes with the VPC) of the stack's VPC
    (``vpc_id``, else the one tagged with the stack), and in a VPC of its own its load balancers."""
    tagged = [{"Name": "tag:eksbench:project", "Values": [project]}, {"Name": "tag:eksbench:stack", "Values": [stack]}]
    vpcs = [vpc_id] if vpc_id else [v["VpcId"] for v in ec2.describe_vpcs(Filters=tagged)["Vpcs"]]
    for vpc in vpcs:
        in_vpc = [{"Name": "vpc-id", "Values": [vpc]}]
        for eni in _pages(ec2, "describe_network_interfaces", "NetworkInterfaces", Filters=in_vpc):
            if _ours(eni, eni.get("Description") or "", cluster=cluster, vpc_id=vpc_id):
                yield (_ec2_arn(session, account, "network-interface", eni["NetworkInterfaceId"]),
                       "ec2:network-interface", f"network interface in the stack's VPC {vpc} "
                       f"({eni.get('Description') or eni.get('InterfaceType')})")
        for sg in _pages(ec2, "describe_security_groups", "SecurityGroups", Filters=in_vpc):
            if sg["GroupName"] != "default" and _ours(sg, sg["GroupName"], cluster=cluster, vpc_id=vpc_id):
                yield (_ec2_arn(session, account, "security-group", sg["GroupId"]), "ec2:security-group",
                       f"security group {sg['GroupName']!r} in the stack's VPC {vpc}")
        if not vpc_id:  # load balancers of a shared VPC cannot be told apart here
            yield from _load_balancers(session, vpc, account=account)


def _load_balancers(session: Any, vpc: str, *, account: str) -> Found:
    """The load balancers in ``vpc``, through both ELB APIs (application/network, and classic)."""
    elbv2 = session.client("elbv2")
    for lb in _pages(elbv2, "describe_load_balancers", "LoadBalancers"):
        if lb.get("VpcId") == vpc:
            yield lb["LoadBalancerArn"], "elasticloadbalancing:loadbalancer", f"load balancer in the stack's VPC {vpc}"
    elb = session.client("elb")
    for lb in _pages(elb, "describe_load_balancers", "LoadBalancerDescriptions"):
        if lb.get("VPCId") == vpc:
            yield (f"arn:aws:elasticloadbalancing:{session.region_name}:{account}:loadbalancer/"
                   f"{lb['LoadBalancerName']}", "elasticloadbalancing:loadbalancer",
                   f"classic load balancer in the stack's VPC {vpc}")


def _cluster_volumes(session: Any, ec2: Any, *, cluster: str, account: str) -> Found:
    """The EBS volumes Kubernetes made for the cluster (tag ``kubernetes.io/cluster/<cluster>``)."""
    for vol in _pages(ec2, "describe_volumes", "Volumes",
                      Filters=[{"Name": "tag-key", "Values": [f"kubernetes.io/cluster/{cluster}"]}]):
        yield _ec2_arn(session, account, "volume", vol["VolumeId"]), "ec2:volume", \
            f"volume Kubernetes created for cluster {cluster}"


def _cluster_log_group(session: Any, *, cluster: str, account: str) -> Found:
    """The cluster's control-plane log group, ``/aws/eks/<cluster>/cluster``."""
    logs = session.client("logs")
    log_group = f"/aws/eks/{cluster}/cluster"
    for g in _pages(logs, "describe_log_groups", "logGroups", logGroupNamePrefix=log_group):
        if g["logGroupName"] == log_group:
            yield (g.get("arn") or f"arn:aws:logs:{session.region_name}:{account}:log-group:{log_group}:*",
                   "logs:log-group", "the cluster's control-plane log group")


def report(leftovers: list[Leftover], *, stack: str, region: str) -> str:
    if not leftovers:
        return f"audit {stack}: nothing left in {region} (tagged with the stack or known to leak)"
    lines = [f"audit {stack}: {len(leftovers)} resource(s) left in {region}; they may cost money until deleted:"]
    for x in leftovers:
        lines += [f"  {x.arn}  ({x.why})", f"    {x.delete}"]
    return "\n".join(lines)


def audit(stack: str, *, root: Path | None = None, session: Any = None, out: Callable[[str], Any] = print) -> int:
    """Audit ``stack`` from its stack file (under ``root``, the project's by default); print the report;
    1 if anything is left, else 0."""
    from core.config.shape import parse_stack_config
    from program.stack_files import PROJECT, ROOT, stack_raw_config

    raw, region = stack_raw_config(stack, root or ROOT)
    cfg = parse_stack_config(raw, project=PROJECT, stack=stack, region=region)
    if session is None:
        import boto3

        session = boto3.session.Session(region_name=cfg.region)
    cluster = cluster_name(cfg.project, cfg.stack)
    leftovers = find_leftovers(session, project=cfg.project, stack=cfg.stack, cluster=cluster,
                               vpc_id=cfg.network.existing_vpc_id)
    out(report(leftovers, stack=stack, region=cfg.region))
    return 1 if leftovers else 0


def audit_after_destroy(stack: str, *, root: Path | None = None, out: Callable[[str], Any] = print) -> bool:
    """``bench run``'s check after its destroy: True when nothing is left. An audit that cannot run
    (no tag:GetResources permission, say) does not fail a destroy that succeeded: it says so and how
    to run it later."""
    try:
        return audit(stack, root=root, out=out) == 0
    except Exception as e:  # noqa: BLE001 - botocore's ClientError and friends: one line
        later = f"run it later: eksbench audit {stack}"
        if line := credentials_problem(e, f"audit {stack}"):  # none, a profile not there, expired
            out(f"{line}; {later}")
        else:
            out(f"audit {stack}: could not run ({type(e).__name__}: {e}); {later}")
        return True
