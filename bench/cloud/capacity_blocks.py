"""What a cloud run checks of its Capacity Block groups: the reservation before it makes anything, the nodes after.

EKS does not check that a Capacity Block's instances join (EKS user guide, "Capacity Blocks for ML"): a group in
another zone than the block, or of another instance type, goes ACTIVE with no node while the block bills, and its
Jobs wait out their deadlines. EKS also scales the group down 40 minutes before the reservation ends. So preflight
reads each group's reservation (``ec2:DescribeCapacityReservations``) and refuses, in one line, a block that is not
a Capacity Block, not active, in another zone, of another type, smaller than the group, or that ends (less those 40
minutes) before the run's deadline. A Capacity Block group must be at desired size 0 to update, so preflight also
refuses a run that would change the launch template of such a group while it has nodes (``check_updates``).

In the watch, an experiment on a Capacity Block group counts as started only once its nodes are Ready: its
``timeout_minutes`` runs from then (``hold``, ``start_when_ready``), not from the end of ``pulumi up``. It waits at
most ``HOLD_LIMIT_MINUTES`` (a block's nodes that never join end the experiment then, as a timeout); the Job's own
``activeDeadlineSeconds`` in the cluster still counts from the Job's creation.
"""

from __future__ import annotations

import datetime
from typing import Any

from bench.errors import Refusal

BLOCK = "CAPACITY_BLOCK"
SCALE_DOWN_MINUTES = 40  # EKS scales a Capacity Block group down this long before the reservation ends
# How long an experiment's clock waits for its block's nodes: boot and join take minutes (DURATIONS' node group,
# 3-5 min); a block whose instances do not join (EKS does not check) must not hold the run until its deadline.
HOLD_LIMIT_MINUTES = 30


def block_groups(cfg: Any) -> list[tuple[int, Any]]:
    """(index in gpu_node_groups, group) of each Capacity Block group."""
    return [(i, g) for i, g in enumerate(cfg.gpu_node_groups) if g.capacity_type == BLOCK]


def _aws_line(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"


def _reservations(ec2: Any, ids: list[str], cfg: Any) -> dict[str, dict[str, Any]]:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=ids).get("CapacityReservations") or []
    except ClientError as e:
        if e.response.get("Error", {}).get("Code", "").startswith("InvalidCapacityReservationId"):
            # one bad id fails the whole call: ask for each alone, so only the groups whose id is bad are named
            return {} if len(ids) == 1 else {k: v for i in ids for k, v in _reservations(ec2, [i], cfg).items()}
        raise Refusal(f"cannot read the Capacity Block reservations {', '.join(ids)} in {cfg.region} "
                      f"({_aws_line(e)}): the credentials need ec2:DescribeCapacityReservations") from None
    except BotoCoreError as e:
        raise Refusal(f"cannot read the Capacity Block reservations in {cfg.region} ({_aws_line(e)})") from None
    return {r.get("CapacityReservationId"): r for r in found}


def _group_zone(ec2: Any, g: Any) -> str | None:
    """The group's zone: availability_zone, else its subnet's (an existing VPC)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if g.availability_zone or not g.subnet_id:
        return g.availability_zone
    try:
        subnets = ec2.describe_subnets(SubnetIds=[g.subnet_id]).get("Subnets") or []
    except (BotoCoreError, ClientError) as e:
        raise Refusal(f"cannot read subnet {g.subnet_id} of Capacity Block group {g.name} ({_aws_line(e)}): the "
                      "credentials need ec2:DescribeSubnets, and the subnet must be in the stack's region") from None
    return subnets[0].get("AvailabilityZone") if subnets else None


def reservation_problem(key: str, g: Any, r: dict[str, Any] | None, zone: str | None, *,
                        now: datetime.datetime, deadline_minutes: float) -> str | None:
    """What is wrong with group ``g``'s reservation ``r`` (in the shape of DescribeCapacityReservations) for a run
    that starts ``now`` and may last ``deadline_minutes``; ``zone``: the group's."""
    cr = f"{key}.capacity_reservation_id={g.capacity_reservation_id}"
    if r is None:
        return f"{cr}: no such Capacity Reservation in this account and region; set the block's id (EC2 console, " \
               "Capacity Reservations)"
    if r.get("ReservationType") != "capacity-block":
        return f"{cr}: is a reservation of type {r.get('ReservationType')}, not a Capacity Block; set the id of a " \
               "Capacity Block, or capacity_type ON_DEMAND"
    state = r.get("State")
    if state != "active":
        when = f" (starts {r['StartDate']:%Y-%m-%d %H:%M} UTC)" if state == "scheduled" and r.get("StartDate") else ""
        return f"{cr}: the block is {state}{when}, not active: run while it is active, or buy a new block"
    if r.get("InstanceType") != g.instance_type:
        return f"{cr}: the block holds {r.get('InstanceType')}, the group asks for {g.instance_type}: set " \
               f"{key}.instance_type to {r.get('InstanceType')}"
    if zone != r.get("AvailabilityZone"):
        where = f"{key}.availability_zone" if g.availability_zone or not g.subnet_id else f"{key}.subnet_id"
        return f"{cr}: the block is in {r.get('AvailabilityZone')}, the group in {zone}: set {where} to " \
               f"{'the zone' if where.endswith('availability_zone') else 'a subnet of'} {r.get('AvailabilityZone')}"
    total = int(r.get("TotalInstanceCount") or 0)
    if g.desired_size > total:
        return f"{cr}: the block holds {total} instance(s), the group asks for desired_size {g.desired_size}: " \
               f"set {key}.desired_size to {total} at most"
    end = r.get("EndDate")
    usable = end - datetime.timedelta(minutes=SCALE_DOWN_MINUTES) if end else None
    if usable is not None and usable < now + datetime.timedelta(minutes=deadline_minutes):
        left = max(0, int((usable - now).total_seconds() // 60))
        return f"{cr}: the block ends {end:%Y-%m-%d %H:%M} UTC and EKS scales its group down {SCALE_DOWN_MINUTES} " \
               f"min before, {left} min from now, inside the run's deadline of {deadline_minutes:.0f} min: pass " \
               f"--deadline {left} or less, shorten or drop experiments, or use a block that ends later"
    return None


def check_reservations(cfg: Any, deadline_minutes: float, *, ec2: Any = None,
                       now: datetime.datetime | None = None) -> str:
    """Each Capacity Block group against its reservation (module docstring); Refusal at the first mismatch."""
    groups = block_groups(cfg)
    if not groups:
        return "no Capacity Block to check"
    if ec2 is None:
        import boto3

        ec2 = boto3.client("ec2", region_name=cfg.region)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    found = _reservations(ec2, sorted({g.capacity_reservation_id for _, g in groups}), cfg)
    done = []
    for i, g in groups:
        r = found.get(g.capacity_reservation_id)
        if problem := reservation_problem(f"gpu_node_groups[{i}]", g, r, _group_zone(ec2, g) if r else None,
                                          now=now, deadline_minutes=deadline_minutes):
            raise Refusal(problem)
        done.append(f"{g.name}: {g.capacity_reservation_id} active in {r['AvailabilityZone']} until "
                    f"{r['EndDate']:%Y-%m-%d %H:%M} UTC")
    return "Capacity Block(s) " + "; ".join(done)


def hold(cfg: Any, watched: list[Any]) -> None:
    """Marks each run of an experiment on a Capacity Block group: its clock waits for the group's nodes
    (``waits_for``: the group and how many Ready nodes it needs, the experiment's ``min_nodes``)."""
    experiments = {e.name: e for e in cfg.experiments}
    for w in watched:
        e = experiments.get(w.experiment or w.name)
        g = cfg.node_group_for(e) if e is not None else None
        if g is not None and g.capacity_type == BLOCK:
            w.waits_for = (g.name, max(1, min(e.min_nodes, g.desired_size)))


def held(watched: list[Any], w: Any, sequential: bool, now: float) -> bool:
    """Whether ``w``'s clock has not started: it waits for its nodes, or (experiments in turn) a run before it does;
    never past ``HOLD_LIMIT_MINUTES`` of waiting (``now``, monotonic), when the timeout applies as it stands."""
    def waiting(x: Any) -> bool:
        return bool(x.waits_for) and not x.finished and now - x.counted_from < HOLD_LIMIT_MINUTES * 60

    return waiting(w) or (sequential and any(waiting(x) for x in watched[:watched.index(w)]))


def _ready_in(nodes: list[Any], group: str) -> int:
    """How many of ``nodes`` (the Kubernetes API's) are Ready and of GPU group ``group`` (its label)."""
    from bench.cloud import kube
    from infra.environment import GPU_NODE_LABEL_KEY

    count = 0
    for node in nodes:
        try:
            count += ((node.get("metadata") or {}).get("labels") or {}).get(GPU_NODE_LABEL_KEY) == group \
                and kube.node_ready(node)
        except (AttributeError, TypeError):  # a node in a shape we do not know counts as not Ready
            continue
    return count


def start_when_ready(watched: list[Any], w: Any, nodes: list[Any], at: float, sequential: bool) -> None:
    """Starts ``w``'s clock at ``at`` (monotonic) once its group has the Ready nodes it needs: its deadline, and in
    sequential execution those of the runs after it, move by the time waited; else says what it waits for."""
    group, need = w.waits_for
    have = _ready_in(nodes, group)
    if have < need:
        w.reasons = [*w.reasons, f"waiting for {need} Ready node(s) of Capacity Block group {group} ({have} now); "
                     f"its timeout counts from then (at most {HOLD_LIMIT_MINUTES} min of waiting)"]
        return
    for x in watched[watched.index(w):] if sequential else [w]:
        if not x.finished and x.counted_from < at:
            x.deadline += at - x.counted_from
            x.counted_from = at
    w.waits_for = None


def template_changes(cfg: Any, g: Any, live: dict[str, Any]) -> list[str]:
    """What the launch template ``pulumi up`` gives group ``g`` changes against ``live`` (its current version's
    LaunchTemplateData, as EC2 gives it): the fields the stack file decides, each ``field: now -> then``."""
    from infra.cluster.node_group import gpu_node_group_spec, launch_template_data

    want = launch_template_data(gpu_node_group_spec(g, lustre_client=cfg.storage.kind == "fsx"),
                                placement_group_name="" if g.placement_group else None)
    disk = ((live.get("BlockDeviceMappings") or [{}])[0].get("Ebs") or {}).get("VolumeSize")
    target = (live.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
    pairs = {
        "instance type": (live.get("InstanceType"), want.get("instance_type")),
        "capacity reservation": (target.get("CapacityReservationId"),
                                 want["capacity_reservation_specification"]["capacity_reservation_target"][
                                     "capacity_reservation_id"]),
        "disk size (GiB)": (disk, want["block_device_mappings"][0]["ebs"]["volume_size"]),
        "user data (the Lustre client)": (live.get("UserData"), want.get("user_data")),
        "EFA interfaces": (len(live.get("NetworkInterfaces") or []), len(want.get("network_interfaces") or [])),
        "placement group": (bool((live.get("Placement") or {}).get("GroupName")), "placement" in want),
    }
    return [f"{name}: {now} -> {then}" for name, (now, then) in pairs.items() if now != then]


def _live_groups(eks: Any, cluster: str) -> list[dict[str, Any]]:
    """The cluster's node groups (describe_nodegroup's ``nodegroup``); [] where the cluster is not there yet."""
    try:
        eks.describe_cluster(name=cluster)
    except eks.exceptions.ResourceNotFoundException:
        return []
    names = [n for page in eks.get_paginator("list_nodegroups").paginate(clusterName=cluster)
             for n in page.get("nodegroups") or []]
    return [eks.describe_nodegroup(clusterName=cluster, nodegroupName=n)["nodegroup"] for n in names]


def check_updates(cfg: Any, *, eks: Any = None, ec2: Any = None) -> str:
    """A Capacity Block group must be at desired size 0 to update (EKS user guide, "Capacity Blocks for ML"): on a
    stack that exists, Refusal where ``pulumi up`` would change the launch template of such a group with nodes."""
    groups = block_groups(cfg)
    if not groups:
        return "no Capacity Block group to update"
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from core.contract.names import cluster_name

    eks = eks or boto3.client("eks", region_name=cfg.region)
    ec2 = ec2 or boto3.client("ec2", region_name=cfg.region)
    cluster = cluster_name(cfg.project, cfg.stack)
    try:
        live = {(ng.get("tags") or {}).get("eksbench:node-group"): ng for ng in _live_groups(eks, cluster)}
        for i, g in groups:
            ng = live.get(g.name)
            desired = ((ng or {}).get("scalingConfig") or {}).get("desiredSize") or 0
            if ng is None or ng.get("capacityType") != BLOCK or not desired or not ng.get("launchTemplate"):
                continue
            lt = ng["launchTemplate"]
            versions = ec2.describe_launch_template_versions(LaunchTemplateId=lt["id"], Versions=[str(lt["version"])])
            data = (versions.get("LaunchTemplateVersions") or [{}])[0].get("LaunchTemplateData") or {}
            if changes := template_changes(cfg, g, data):
                raise Refusal(f"gpu_node_groups[{i}] ({g.name}): this run changes the launch template of Capacity "
                              f"Block node group {ng['nodegroupName']} ({'; '.join(changes)}), and EKS updates such "
                              f"a group only at desired size 0 (it has {desired}): scale it to 0 first (aws eks "
                              f"update-nodegroup-config --cluster-name {cluster} --nodegroup-name "
                              f"{ng['nodegroupName']} --scaling-config desiredSize=0; its pods go), or undo the "
                              "change until the block ends")
    except (BotoCoreError, ClientError) as e:
        raise Refusal(f"cannot read the node groups of cluster {cluster} in {cfg.region} ({_aws_line(e)}): the "
                      "credentials need eks:DescribeCluster, eks:ListNodegroups, eks:DescribeNodegroup and "
                      "ec2:DescribeLaunchTemplateVersions") from None
    return f"Capacity Block group(s) {', '.join(g.name for _, g in groups)}: no launch template change at size > 0"
