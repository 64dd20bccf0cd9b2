"""What a stack costs per hour and how long it takes to build, estimated offline.

Cost: instance prices in the stack's region from the catalog's snapshot (``core.catalog.aws_prices``, its source
and date in ``catalog.price_label``) times the desired node counts, plus the control plane, NAT gateways and FSx
(``catalog.OTHER_PRICES``). An instance type with no price in the region is an item of None, never another
region's price, and makes the total unknown. Time: the critical path of the resource dependency
graph, with per-type durations from ``DURATIONS`` (each with its source).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from core.catalog import aws as catalog
from core.config.model import StackConfig

# Minutes to create one resource of a type: midpoints of publicly reported provisioning times
# (EKS control plane 9-15 min, managed node group 3-5 min, FSx for Lustre 10-12 min, NAT
# gateway 1-2 min; AWS re:Post and EKS workshop reports); "assumed" marks our own estimate
# where none is published.
DURATIONS: dict[str, tuple[float, str]] = {
    "eks:index:Cluster": (12.0, "EKS control plane 9-15 min (public reports)"),
    "aws:eks/nodeGroup:NodeGroup": (4.0, "managed node group 3-5 min (public reports)"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": (11.0, "FSx for Lustre 10-12 min (public reports)"),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (5.0, "assumed"),
    "aws:ec2/natGateway:NatGateway": (1.5, "NAT gateway 1-2 min (public reports)"),
    "aws:efs/mountTarget:MountTarget": (1.5, "EFS mount target > 1 min to become available"),
    "aws:eks/addon:Addon": (1.0, "assumed"),
    "kubernetes:apps/v1:Deployment": (0.5, "assumed: image pull and readiness"),
    "kubernetes:apps/v1:DaemonSet": (0.5, "assumed: image pull and readiness"),
    "kubernetes:batch/v1:Job": (2.0, "assumed: awaited staging Jobs; training Jobs skip the await"),
}
DEFAULT_MINUTES = 0.05  # an API call


@dataclass(frozen=True)
class Node:
    urn: str
    type: str
    parent: str
    dependencies: tuple[str, ...]
    custom: bool
    skip_await: bool = False


def minutes_for(node: Node) -> float:
    if node.skip_await:
        return DEFAULT_MINUTES
    return DURATIONS.get(node.type, (DEFAULT_MINUTES, ""))[0]


def finish_times(nodes: Iterable[Node]) -> dict[str, float]:
    """When each resource is done (minutes from the start of ``pulumi up``), along its longest dependency chain."""
    finish, _ = _finish(list(nodes))
    return {urn: t for urn, (t, _) in finish.items()}


def critical_path(nodes: Iterable[Node]) -> tuple[float, list[Node]]:
    """Longest finish time over the graph; a dependency on a component waits for all its descendants. Of equally
    long paths, the one through the first URNs: the same whatever order the resources registered in."""
    nodes = sorted(nodes, key=lambda n: n.urn)
    if not nodes:
        return 0.0, []
    finish, by_urn = _finish(nodes)
    end = max(nodes, key=lambda n: finish[n.urn][0])
    path, cursor = [], end.urn
    while cursor:
        path.append(by_urn[cursor])
        cursor = finish[cursor][1]
    return round(finish[end.urn][0], 2), list(reversed(path))


def _finish(nodes: list[Node]) -> tuple[dict[str, tuple[float, str | None]], dict[str, Node]]:
    by_urn = {n.urn: n for n in nodes}
    children: dict[str, list[str]] = {}
    for n in nodes:
        children.setdefault(n.parent, []).append(n.urn)

    def leaves(urn: str) -> list[str]:
        node = by_urn.get(urn)
        if node is None:
            return []
        if node.custom or not children.get(urn):
            return [urn]
        return [leaf for c in children[urn] for leaf in leaves(c)]

    finish: dict[str, tuple[float, str | None]] = {}

    def done(urn: str, stack: frozenset = frozenset()) -> float:
        if urn in finish:
            return finish[urn][0]
        if urn in stack:
            raise ValueError(f"dependency cycle through {urn}")
        node = by_urn[urn]
        start, via = 0.0, None
        for dep in sorted(node.dependencies):
            for leaf in leaves(dep):
                t = done(leaf, stack | {urn})
                if t > start:
                    start, via = t, leaf
        finish[urn] = (start + (minutes_for(node) if node.custom or not children.get(urn) else 0.0), via)
        return finish[urn][0]

    for n in nodes:
        done(n.urn)
    return finish, by_urn


# --- Before the first step. The training Jobs skip Pulumi's await, so `pulumi up` can end before any pod
# runs; an experiment's first step then waits for its GPU nodes to boot and join and for the image's pull.
#
# GPU node boot and join: inside the node group's own creation time (DURATIONS' NodeGroup, 3-5 min in
# public reports). EKS holds a managed node group in CREATING until its instances join, and fails the
# creation with NodeCreationFailure "Instances failed to join the kubernetes cluster" when they do not
# (terraform-aws-modules/terraform-aws-eks#2819), and aws.eks.NodeGroup waits for ACTIVE; so the group's
# finish time along the graph is when its nodes have joined.
# Not modelled, for want of a typical figure: the NVIDIA device plugin advertising the GPUs after the node
# is Ready. kubernetes/autoscaler cluster-autoscaler/utils/gpu/gpu.go says only that it "can take up to
# 15 minutes" (an upper bound).
#
# The image's pull. Its size: the image list (core/catalog/compat.py IMAGES, ``size_mb``) carries the DLC build's
# own size baseline, which is the UNPACKED size (docker inspect's Size; the build fails above 1.2x of it);
# the DLC image list (aws/deep-learning-containers docs/src/data/pytorch-training/*.yml, available_images)
# publishes no compressed size, so none is used. The rate is therefore in MB of unpacked image per second,
# download and unpack together, from one published measurement: AWS's EKS Blueprints "EKS Cluster w/
# Cached ML Images" (aws-ia.github.io/terraform-aws-eks-blueprints/patterns/machine-learning/
# ml-container-cache): nvcr.io/nvidia/pytorch:24.08-py3, 9.5 GB compressed and 20.4 GB on disk, started
# "roughly 6 minutes (334 seconds)" after scheduling on a node without the image. One image on one
# instance type: a rough rate, labelled so wherever it is shown.
IMAGE_PULL_MB_PER_S = 20_400 / 334
IMAGE_PULL_SOURCE = ("unpacked image size / 61 MB/s: EKS Blueprints ml-container-cache, a 20.4 GB PyTorch image "
                     "started in 334 s uncached (one measurement)")


def image_pull_minutes(size_mb: float | None) -> float | None:
    """Minutes to pull and unpack an image of ``size_mb`` MB unpacked; None when its size is unknown."""
    return None if not size_mb else round(size_mb / IMAGE_PULL_MB_PER_S / 60, 1)


def first_step_minutes(*, job_created: float, nodes_joined: float, image_mb: float | None) -> dict:
    """When an experiment's first pod can run its image (minutes from the start of ``pulumi up``): its
    Job created and its GPU nodes joined, then the image pulled. Start-up in the pod (torchrun, rendezvous,
    imports, the first step) is not in it."""
    pull = image_pull_minutes(image_mb)
    ready = max(job_created, nodes_joined)
    return {"job_created": round(job_created, 1), "gpu_nodes_joined": round(nodes_joined, 1),
            "image_pull": pull, "image_running": round(ready + pull, 1) if pull is not None else None}


GPU_ITEM = "gpu nodes "  # hourly_cost's line items for GPU groups start with it


def hourly_cost(cfg: StackConfig, *, nat_gateways: int, today: str) -> dict[str, float | None]:
    """USD per hour at desired sizes, by line item: instances at the stack's region's prices (None where the
    snapshot has none there, ``unpriced``), the rest at ``catalog.OTHER_PRICES``. ``today`` (ISO date, the
    caller's clock) decides whether the control plane bills at the extended-support rate."""
    items: dict[str, float | None] = {}
    for g in cfg.gpu_node_groups:
        items[f"{GPU_ITEM}{g.name} ({g.desired_size}x {g.instance_type})"] = _nodes(g.desired_size, g.instance_type,
                                                                                   cfg.region)
    s = cfg.system_nodes
    items[f"system nodes ({s.desired_size}x {s.instance_type})"] = _nodes(s.desired_size, s.instance_type, cfg.region)
    version = cfg.cluster.kubernetes_version
    extended = catalog.eks_support(version, today) == "extended"
    items["EKS control plane" + (f" (extended support for {version})" if extended else "")] = (
        catalog.control_plane_usd_per_hour(version, today))
    if nat_gateways:
        items[f"NAT gateways ({nat_gateways})"] = nat_gateways * catalog.NAT_GATEWAY_USD_PER_HOUR
    if cfg.storage.kind == "fsx":
        f = cfg.storage.fsx
        per_gib = (catalog.FSX_PERSISTENT_2_USD_PER_GIB_MONTH[f.per_unit_storage_throughput]
                   if f.deployment_type == "PERSISTENT_2" else catalog.FSX_SCRATCH_2_USD_PER_GIB_MONTH)
        items[f"FSx for Lustre ({f.storage_capacity_gib} GiB {f.deployment_type})"] = (
            f.storage_capacity_gib * per_gib / catalog.HOURS_PER_MONTH)
    return {k: round(v, 4) if v is not None else None for k, v in items.items()}


def _nodes(count: int, instance_type: str, region: str) -> float | None:
    price = catalog.usd_per_hour(instance_type, region)
    return 0.0 if count == 0 else count * price if price is not None else None


def unpriced(cfg: StackConfig) -> list[str]:
    """``catalog.no_price`` for each instance type the stack runs (desired size above 0) that has no price in its
    region, once each."""
    groups = [*cfg.gpu_node_groups, cfg.system_nodes]
    types = dict.fromkeys(g.instance_type for g in groups if g.desired_size)
    return [catalog.no_price(t, cfg.region) for t in types if catalog.usd_per_hour(t, cfg.region) is None]


def total(items: dict[str, float | None]) -> float | None:
    """The items' sum in USD per hour, rounded to cents; None when one of them has no price."""
    return None if any(v is None for v in items.values()) else round(sum(items.values()), 2)


def cost_after_autostop(items: dict[str, float | None]) -> float | None:
    """What ``hourly_cost``'s items still bill once the GPU groups are at zero (autostop, ``--keep``):
    the control plane, NAT, system nodes and FSx (None when the system nodes have no price). EFS bills per GB
    stored and is not in it."""
    return total({k: v for k, v in items.items() if not k.startswith(GPU_ITEM)})


def sweep_idle(cfg: StackConfig) -> list[dict]:
    """Per GPU group with runs on it: the GPU node-hours its runs bill one after another, and the share idle.

    A GPU group stays at its desired size for the whole stack's life, whatever runs: a run on n of
    its N nodes leaves N - n of them billing idle. Each run counted for one hour (its real length is
    not known before it runs), each repeat a run of its own (``Experiment.runs``). The README's sweep,
    ``nodes: [1, 2, 4]`` with ``repeats: 3`` on a 4-node group: 9 runs bill 36 node-hours and use 21,
    42% idle. Dollars at the group's on-demand price in the stack's region (``catalog.usd_per_hour``), None
    where the snapshot has none there.
    """
    rows = []
    for g in cfg.gpu_node_groups:
        runs = [r for e in cfg.experiments if cfg.node_group_for(e).name == g.name for r in e.runs()]
        if not runs or not g.desired_size:
            continue
        billed = len(runs) * g.desired_size
        used = sum(min(r.max_nodes, g.desired_size) for r in runs)
        price = catalog.usd_per_hour(g.instance_type, cfg.region)  # None: no price in the stack's region
        rows.append({"group": g.name, "instance_type": g.instance_type, "nodes": g.desired_size, "runs": len(runs),
                     "billed_node_hours": billed, "used_node_hours": used,
                     "idle_share": round((billed - used) / billed, 4),
                     "billed_usd": _usd(billed, price), "idle_usd": _usd(billed - used, price)})
    return rows


def _usd(node_hours: float, price: float | None) -> float | None:
    return round(node_hours * price, 2) if price is not None else None
