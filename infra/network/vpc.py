"""The VPC: public and private subnets over 2-3 AZs, NAT, and an S3 gateway endpoint.

Nodes only ever go in the private subnets; the public ones hold the NAT gateways and
any load balancers. With ``network.existing`` set, nothing is created and the given
ids pass through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import pulumi
import pulumi_aws as aws

from core.config.model import Network as NetworkConfig
from infra.component_options import child_options
from infra.network.subnets import subnet_plan


@dataclass(frozen=True)
class NetworkArgs:
    """config: CIDR, NAT and an optional existing VPC. cluster_name: for the subnets' EKS discovery tags.
    region: for the S3 endpoint's service name. azs: the zones to span (chosen from the region's
    offerings by the program). tags: on every resource."""
    config: NetworkConfig
    cluster_name: str
    region: str
    azs: tuple[str, ...]
    tags: Mapping[str, str] = field(default_factory=dict)


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]
    azs: list[str]
    nat_gateway_count: int

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:Network", name, None, opts)
        config, cluster_name, region, tags = args.config, args.cluster_name, args.region, dict(args.tags)
        child = child_options(self, opts)
        self.azs = list(args.azs)
        if config.existing_vpc_id:
            self.vpc_id = pulumi.Output.from_input(config.existing_vpc_id)
            self.public_subnet_ids = [pulumi.Output.from_input(s) for s in config.existing_public_subnet_ids]
            self.private_subnet_ids = [pulumi.Output.from_input(s) for s in config.existing_private_subnet_ids]
            self.nat_gateway_count = 0
            self.register_outputs({"vpc_id": self.vpc_id})
            return

        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=config.vpc_cidr, enable_dns_hostnames=True,
                          enable_dns_support=True, tags={**tags, "Name": f"{name}-vpc"}, opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=child)
        public_rt = aws.ec2.RouteTable(f"{name}-public-rt", vpc_id=vpc.id, tags=tags, opts=child,
                                       routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}])
        # EKS discovers subnets for load balancers by these tags (AWS docs: "Subnet requirements").
        shared = {f"kubernetes.io/cluster/{cluster_name}": "shared"}
        public, private, nats = [], [], []
        for i, pair in enumerate(subnet_plan(config.vpc_cidr, self.azs)):
            pub = aws.ec2.Subnet(f"{name}-public-{i}", vpc_id=vpc.id, cidr_block=pair.public_cidr,
                                 availability_zone=pair.az, map_public_ip_on_launch=False, opts=child,
                                 tags={**tags, **shared, "kubernetes.io/role/elb": "1", "Name": f"{name}-public-{pair.az}"})
            aws.ec2.RouteTableAssociation(f"{name}-public-{i}-rta", subnet_id=pub.id, route_table_id=public_rt.id,
                                          opts=child)
            priv = aws.ec2.Subnet(f"{name}-private-{i}", vpc_id=vpc.id, cidr_block=pair.private_cidr,
                                  availability_zone=pair.az, map_public_ip_on_launch=False, opts=child,
                                  tags={**tags, **shared, "kubernetes.io/role/internal-elb": "1",
                                        "Name": f"{name}-private-{pair.az}"})
            public.append(pub)
            private.append(priv)
            if config.nat == "per_az" or i == 0:
                eip = aws.ec2.Eip(f"{name}-nat-eip-{i}", domain="vpc", tags=tags, opts=child)
                nats.append(aws.ec2.NatGateway(f"{name}-nat-{i}", subnet_id=pub.id, allocation_id=eip.id,
                                               tags=tags, opts=child_options(self, opts, depends_on=[igw])))
        private_rts = []
        for i, priv in enumerate(private):
            nat = nats[i] if config.nat == "per_az" else nats[0]
            rt = aws.ec2.RouteTable(f"{name}-private-rt-{i}", vpc_id=vpc.id, tags=tags, opts=child,
                                    routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}])
            aws.ec2.RouteTableAssociation(f"{name}-private-{i}-rta", subnet_id=priv.id, route_table_id=rt.id,
                                          opts=child)
            private_rts.append(rt)
        # Dataset and results traffic to S3 stays off the NAT gateways (no per-GB NAT charge).
        aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, vpc_endpoint_type="Gateway",
                            service_name=f"com.amazonaws.{region}.s3",
                            route_table_ids=[rt.id for rt in private_rts], tags=tags, opts=child)
        self.vpc_id = vpc.id
        self.public_subnet_ids = [s.id for s in public]
        self.private_subnet_ids = [s.id for s in private]
        self.nat_gateway_count = len(nats)
        self.register_outputs({"vpc_id": self.vpc_id, "private_subnet_ids": self.private_subnet_ids})
