"""Carves the VPC CIDR into public and private subnets, one pair per availability zone."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class SubnetPair:
    az: str
    public_cidr: str
    private_cidr: str


def subnet_plan(vpc_cidr: str, azs: list[str]) -> list[SubnetPair]:
    """Private subnets get the big blocks (pods take VPC IPs with the VPC CNI); public small ones.

    A /16 yields /19 private subnets (8,190 addresses each) and /22 public ones.
    """
    vpc = ipaddress.ip_network(vpc_cidr)
    halves = list(vpc.subnets(prefixlen_diff=1))
    private = list(halves[0].subnets(new_prefix=min(vpc.prefixlen + 3, 28)))
    public = list(halves[1].subnets(new_prefix=min(vpc.prefixlen + 6, 28)))
    if len(azs) > min(len(private), len(public)):
        raise ValueError(f"{vpc_cidr} is too small for {len(azs)} availability zones")
    return [SubnetPair(az, str(public[i]), str(private[i])) for i, az in enumerate(azs)]
