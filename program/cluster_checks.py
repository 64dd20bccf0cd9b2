"""Meaning rules of the stack's place on AWS: a region AWS has, the cluster's API endpoint and version, the
network's zones. ``program.validation.meaning_problems`` runs them with the others."""

from __future__ import annotations

from typing import Mapping

from core.catalog import aws as catalog
from core.catalog.pins import DEFAULT_EKS_VERSION, EKS_ADDON_REGISTRY_ACCOUNTS
from core.config.fields import documentation_cidr, problem, show
from core.config.model import StackConfig


def known_regions() -> set[str]:
    """Every region of every partition in botocore's endpoint data (``botocore/data/endpoints.json``), where EKS
    is offered: what AWS can build a cluster in, as far as the SDK the program runs on knows.

    Read with botocore's loader and endpoint resolver alone, as ``botocore.session.Session.get_available_regions``
    reads them, but without a session: a session resolves the AWS profile first, so an ``AWS_PROFILE`` naming no
    profile (or set empty) failed the offline plan, which needs no AWS account at all. ``AWS_DATA_PATH`` is still
    honoured; a profile's ``data_path`` is not read."""
    import os

    from botocore.loaders import create_loader
    from botocore.regions import EndpointResolver

    loader = create_loader(os.environ.get("AWS_DATA_PATH"))
    endpoints, path = loader.load_data_with_path("endpoints")
    resolver = EndpointResolver(endpoints, uses_builtin_data=loader.is_builtin_path(path))
    return {r for p in resolver.get_available_partitions() for r in resolver.get_available_endpoints("eks", p)}


def region_problems(cfg: StackConfig) -> list[str]:
    """A region AWS has (offline, the mock engine would answer for any name: invented zones, invented offers)."""
    known = known_regions()
    if not cfg.region or not known or cfg.region in known:
        return []
    return [problem("aws:region", cfg.region, f"is not an AWS region with EKS in botocore's endpoint data; the "
                    f"{len(known)} known are {', '.join(sorted(known))}", '"us-west-2"')]


PRIVATE_ENDPOINT_HINT = ('your own addresses, e.g. ["<your public IP>/32"] (curl https://checkip.amazonaws.com), '
                         'or [] for a private endpoint only (then run pulumi up from inside the VPC)')


def cluster_problems(cfg: StackConfig, today: str | None, cluster: bool = True) -> list[str]:
    """The API endpoint's exposure is an explicit choice (for a stack that builds the cluster); the version can
    still be created on ``today``."""
    out, c = [], cfg.cluster
    if c.public_access_cidrs is None and cluster:
        out.append(f"cluster.public_access_cidrs: is required: who may reach the Kubernetes API endpoint; "
                   f"{PRIVATE_ENDPOINT_HINT}")
    else:
        for i, cidr in enumerate(c.public_access_cidrs or ()):
            if documentation_cidr(cidr):
                out.append(problem(f"cluster.public_access_cidrs[{i}]", cidr,
                                   "is a documentation range (RFC 5737) that routes nowhere, so nobody, you included, "
                                   f"could reach the API; put {PRIVATE_ENDPOINT_HINT}"))
    if today is not None and catalog.eks_support(c.kubernetes_version, today) == "ended":
        v = catalog.EKS_CALENDAR[c.kubernetes_version]
        current = [x for x in catalog.EKS_VERSIONS if catalog.eks_support(x, today) != "ended"]
        out.append(problem("cluster.kubernetes_version", c.kubernetes_version,
                           f"extended support ended on {v.end_of_extended}, so EKS no longer creates it; "
                           f"choose one of {', '.join(current)}", show(DEFAULT_EKS_VERSION)))
    if any(g.efa for g in cfg.gpu_node_groups) and cfg.region and cfg.region not in EKS_ADDON_REGISTRY_ACCOUNTS:
        out.append(problem("aws:region", cfg.region,
                           "the EFA device plugin's registry account for this region is not known to eksbench "
                           "(core/catalog/pins.py EKS_ADDON_REGISTRY_ACCOUNTS, from the AWS docs' \"Amazon container image "
                           "registries\" table); add it there, or use one of "
                           + ", ".join(sorted(EKS_ADDON_REGISTRY_ACCOUNTS)), '"us-east-1"'))
    return out


def network_problems(cfg: StackConfig, zones: Mapping[str, str] | None) -> list[str]:
    """An existing VPC with two private subnets; pinned zones, at least two, each a zone of the region (``zones``)."""
    n, out = cfg.network, []
    if n.existing_vpc_id and len(n.existing_private_subnet_ids) < 2:
        out.append(problem("network.existing.private_subnet_ids", list(n.existing_private_subnet_ids),
                           "an existing VPC needs at least two private subnets in different AZs (EKS requires two AZs)",
                           '["subnet-0a...", "subnet-0b..."]'))
    if n.azs:
        if len(set(n.azs)) < 2:
            out.append(problem("network.azs", list(n.azs), "needs at least two distinct zones (EKS requires two)",
                               '["us-west-2a", "us-west-2b"]'))
        if zones is not None:
            for i, z in enumerate(n.azs):
                if z not in zones:
                    out.append(problem(f"network.azs[{i}]", z, f"is not a zone of {cfg.region} where EKS runs its "
                                       f"control plane; zones there: {', '.join(zones)}",
                                       show(next(iter(zones), "us-west-2a"))))
    return out
