"""Facts about AWS offerings that the config parser and the planner need.

Pure data: instance types (GPUs, EFA), their on-demand price in a region (``usd_per_hour``, from the snapshot
``core.catalog.aws_prices``), the Kubernetes versions EKS offers, and the AMI types for GPU nodes. Prices are
volatile and differ by region; every figure derived from them is printed with its region, its source and the date
it holds (``price_label``), so nobody mistakes an estimate for a bill, and a type with no price in a region is
named (``no_price``), never priced from another region. Also where AWS's SDKs look for credentials, so every
command that finds none says how to provide them alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.catalog import aws_prices

# The region eksbench assumes where none is known (an image's registry, the mocks, an example).
DEFAULT_REGION = "us-west-2"


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    gpus: int = 0
    gpu_model: str = ""
    gpu_memory_gib: int = 0
    efa: bool = False
    retiring: bool = False
    network_cards: int = 1  # EC2 DescribeInstanceTypes NetworkInfo.MaximumNetworkCards


def _t(name, vcpus, mem, gpus=0, model="", gmem=0, efa=False, retiring=False, cards=1):
    return InstanceType(name, vcpus, mem, gpus, model, gmem, efa, retiring, cards)


def efa_interfaces(instance_type: str) -> int:
    """EFA interfaces on one node of an EFA type: one per network card, as the launch template creates them
    (infra/cluster/node_group.py) and the pods request them (workloads/job_manifests.py); 0 without EFA."""
    spec = INSTANCE_TYPES[instance_type]
    return spec.network_cards if spec.efa else 0


# Prices: by region, in core/catalog/aws_prices.py (``usd_per_hour`` below).
# EFA support: AWS "Supported instance types" for EFA (p3dn, p4d, p5, g5/g6/g6e >= 8xlarge).
# Network cards (one EFA interface each): AWS EC2 user guide, "Maximize network bandwidth on accelerated
# computing instances with EFA" (P5 and P5e: up to 32 network cards; G6e: up to four, on g6e.48xlarge)
# and "Network cards" (p4d.24xlarge and p4de.24xlarge: 4); every other type here has one.
INSTANCE_TYPES: dict[str, InstanceType] = {
    t.name: t
    for t in (
        # P3: V100 16 GB. AWS is retiring P3; kept because the dev stack's design asks for it.
        _t("p3.2xlarge", 8, 61, 1, "V100", 16, retiring=True),
        _t("p3.8xlarge", 32, 244, 4, "V100", 16, retiring=True),
        _t("p3.16xlarge", 64, 488, 8, "V100", 16, retiring=True),
        _t("p3dn.24xlarge", 96, 768, 8, "V100", 32, efa=True, retiring=True),
        _t("p4d.24xlarge", 96, 1152, 8, "A100", 40, efa=True, cards=4),
        _t("p4de.24xlarge", 96, 1152, 8, "A100", 80, efa=True, cards=4),
        _t("p5.48xlarge", 192, 2048, 8, "H100", 80, efa=True, cards=32),
        _t("p5e.48xlarge", 192, 2048, 8, "H200", 141, efa=True, cards=32),
        _t("g4dn.xlarge", 4, 16, 1, "T4", 16),
        _t("g4dn.12xlarge", 48, 192, 4, "T4", 16),
        _t("g5.xlarge", 4, 16, 1, "A10G", 24),
        _t("g5.2xlarge", 8, 32, 1, "A10G", 24),
        _t("g5.8xlarge", 32, 128, 1, "A10G", 24, efa=True),
        _t("g5.12xlarge", 48, 192, 4, "A10G", 24, efa=True),
        _t("g5.48xlarge", 192, 768, 8, "A10G", 24, efa=True),
        _t("g6.xlarge", 4, 16, 1, "L4", 24),
        _t("g6.12xlarge", 48, 192, 4, "L4", 24, efa=True),
        _t("g6.48xlarge", 192, 768, 8, "L4", 24, efa=True),
        _t("g6e.xlarge", 4, 32, 1, "L40S", 48),
        _t("g6e.12xlarge", 48, 384, 4, "L40S", 48, efa=True),
        _t("g6e.48xlarge", 192, 1536, 8, "L40S", 48, efa=True, cards=4),
        # CPU types for the system node group (etcd, add-on controllers, staging jobs).
        _t("t3.large", 2, 8),
        _t("m5.large", 2, 8),
        _t("m5.xlarge", 4, 16),
        _t("m6i.large", 2, 8),
        _t("m6i.xlarge", 4, 16),
        _t("m7i.large", 2, 8),
        _t("m7i.xlarge", 4, 16),
        _t("c6i.2xlarge", 8, 16),
    )
}

# The GPU families to suggest when a type is not offered (P3 retirement).
GPU_ALTERNATIVES = ("g5.48xlarge", "g6.48xlarge", "g6e.48xlarge", "p4d.24xlarge", "p5.48xlarge")

# Other hourly charges the planner adds: us-west-2 list prices as of 2026-11-22 (OTHER_PRICES), used for every
# region (they are not in the instance snapshot; the plan says where they come from).
OTHER_PRICES_REGION = "us-west-2"
OTHER_PRICES_AS_OF = "2026-11-22"
OTHER_PRICES = f"{OTHER_PRICES_REGION} list prices as of {OTHER_PRICES_AS_OF}"
EKS_CONTROL_PLANE_USD_PER_HOUR = 0.10
NAT_GATEWAY_USD_PER_HOUR = 0.045
FSX_PERSISTENT_2_USD_PER_GIB_MONTH = {125: 0.145, 250: 0.21, 500: 0.34, 1000: 0.60}
FSX_SCRATCH_2_USD_PER_GIB_MONTH = 0.14
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class S3Prices:
    """S3 Standard's prices in one region: what a home stack's bucket (results and datasets) bills by use."""
    usd_per_gb_month: float  # storage, first 50 TB tier; S3 counts a GB as 2^30 bytes
    usd_per_1000_writes: float  # PUT, COPY, POST and LIST requests (usage type <REGION>-Requests-Tier1)
    usd_per_1000_reads: float  # GET, SELECT and every other request (<REGION>-Requests-Tier2)
    source: str


# Source: the AWS Price List offer file of AmazonS3 for the region, version 20260918174747 (published
# 2026-09-18T17:47:47Z), https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonS3/20260918174747/us-west-2/
# index.json: Standard storage SKU Z3FQZG73HYSPVABR, first 50 TB, 0.0230000000 USD per GB-Mo; USW2-Requests-Tier1
# rate code D4PMUVH6F64HK2D6.JRTCKXETXF.6YS6EN2CT7, 0.0000050000 USD per request; USW2-Requests-Tier2 rate code
# E77AQEM2DC4VV3FC.JRTCKXETXF.6YS6EN2CT7, 0.0000004000 USD per request (as a public cost model quoting that file with
# its rate codes records them; read 2026-11-28). A region not here has no S3 price in eksbench: the plan says so,
# and never prices it from another region.
S3_STANDARD_PRICES: dict[str, S3Prices] = {
    "us-west-2": S3Prices(0.023, 0.005, 0.0004, "AWS Price List, AmazonS3 us-west-2, version 20260918174747"),
}
S3_PRICING_PAGE = "https://aws.amazon.com/s3/pricing/"

# Kubernetes versions on EKS: release date, end of standard support, end of extended support, and the
# kernel of the AL2023 EKS AMIs built for it. Sources: the EKS user guide, "Understand the Kubernetes version
# lifecycle on EKS" (14 months of standard support from the EKS release, then 12 months of extended support at
# $0.60 per cluster-hour instead of $0.10) and its release calendar; dates for 1.30-1.35 as listed on
# endoflife.date/amazon-eks (checked 2026-11-22). A version past its end of extended support can no longer be
# created.
# 1.36: the AMI changelog (awslabs/amazon-eks-ami CHANGELOG.md at 81fec2e, 2026-07-23) lists
# amazon-eks-node-al2023-x86_64-nvidia-1.36 from AMI release v20260610 (Kubernetes 1.36.1, artifacts of
# 2026-06-09) to v20260714 (1.36.2); no EKS calendar entry for it was found offline, so its release date is that
# first AMI release and its support dates follow the 14 + 12 month rule: approximate, as the calendar's own
# "dates with only a month and a year are approximate".
# Kernels: the changelog's "Source AMI Name" table (v20260714): AL2023_x86_64_NVIDIA and _STANDARD on
# kernel-6.18 for 1.36, kernel-6.12 for 1.33-1.35, kernel-6.1 for 1.30-1.32.
@dataclass(frozen=True)
class EksVersion:
    version: str
    released: str  # ISO dates
    end_of_standard: str
    end_of_extended: str
    al2023_kernel: str  # the x86_64 AL2023 AMIs' kernel series (NVIDIA and standard)
    approximate: bool = False  # dates derived from the first AMI release, not from EKS's calendar


EKS_CALENDAR_CHECKED = "2026-11-28"
EKS_CALENDAR: dict[str, EksVersion] = {v.version: v for v in (
    EksVersion("1.30", "2024-05-23", "2025-07-23", "2026-07-23", "6.1"),
    EksVersion("1.31", "2024-09-26", "2025-11-26", "2026-11-26", "6.1"),
    EksVersion("1.32", "2025-01-25", "2026-03-23", "2027-03-23", "6.1"),
    EksVersion("1.33", "2025-05-28", "2026-07-29", "2027-07-29", "6.12"),
    EksVersion("1.34", "2025-10-06", "2026-12-02", "2027-12-02", "6.12"),
    EksVersion("1.35", "2026-01-28", "2027-03-27", "2028-03-27", "6.12"),
    EksVersion("1.36", "2026-06-10", "2027-08-10", "2028-08-10", "6.18", approximate=True),
)}
EKS_VERSIONS = tuple(EKS_CALENDAR)
NEWEST_EKS_VERSION = EKS_VERSIONS[-1]

# The AL2023 kernel series for which a `lustre-client` package in the AL2023 repositories is known: kernel 6.1,
# where the FSx for Lustre user guide ("Installing the Lustre client", Amazon Linux 2023) installs it with dnf and
# users mount FSx from EKS nodes (amazonlinux/amazon-linux-2023#723, kernel 6.1). For 6.12 (EKS 1.33-1.35) and
# 6.18 (1.36) no source reachable offline says whether the repositories build the client: where they do not,
# the node's install fails, the node never gets the Lustre-ready label and the FSx pods stay Pending until the
# run names it (infra.cluster.node_group, bench.cloud.kube). Bottlerocket's kernels carry the module.
LUSTRE_CLIENT_KNOWN_KERNELS = ("6.1",)
EKS_EXTENDED_SUPPORT_USD_PER_HOUR = 0.60


def eks_support(version: str, today: str) -> str:
    """``standard``, ``extended`` or ``ended`` for ``version`` on ``today`` (ISO date; the caller's clock)."""
    v = EKS_CALENDAR[version]
    if today <= v.end_of_standard:
        return "standard"
    if today <= v.end_of_extended:
        return "extended"
    return "ended"


def control_plane_usd_per_hour(version: str, today: str) -> float:
    return (EKS_EXTENDED_SUPPORT_USD_PER_HOUR if eks_support(version, today) == "extended"
            else EKS_CONTROL_PLANE_USD_PER_HOUR)


# GPU AMI types for managed node groups. The AL2 GPU AMIs reached end of support on
# 2025-11-26. AL2023 NVIDIA ships the driver and container toolkit but not the device
# plugin; Bottlerocket NVIDIA ships the device plugin too.
GPU_AMI_TYPES = ("AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA")
AMI_TYPES_WITH_DEVICE_PLUGIN = ("BOTTLEROCKET_x86_64_NVIDIA",)
CPU_AMI_TYPE = "AL2023_x86_64_STANDARD"


# The on-demand prices an instance-hour can plausibly have, in USD: the catalog's cheapest type lists near 0.08 and
# its dearest near 76, and no EC2 instance lists above a few hundred. ``eksbench prices build`` refuses a price
# outside it, and a snapshot edited by hand to hold one has no price there: no cost figure is ever inf or 1e308.
PLAUSIBLE_USD_PER_HOUR = (0.001, 1000.0)


def plausible_price(usd: object) -> bool:
    """A number of USD an instance-hour can cost (``PLAUSIBLE_USD_PER_HOUR``); False for NaN, inf, a bool, text."""
    low, high = PLAUSIBLE_USD_PER_HOUR
    return isinstance(usd, (int, float)) and not isinstance(usd, bool) and low <= usd <= high


def usd_per_hour(instance_type: str | None, region: str | None) -> float | None:
    """On-demand USD/hour of one instance of ``instance_type`` in ``region`` (``price_label(region)`` says where
    from and when); None where the snapshot has no price for that type in that region (never another region's)
    or one outside ``PLAUSIBLE_USD_PER_HOUR``."""
    usd = aws_prices.USD_PER_HOUR.get(instance_type or "", {}).get(region or "")
    return usd if plausible_price(usd) else None


def price_label(region: str | None) -> str:
    """What an instance price in ``region`` is, for printing beside every figure derived from it."""
    return f"{region or 'unknown region'} on-demand list prices, {aws_prices.SOURCE}, {aws_prices.AS_OF}"


def no_price(instance_type: str | None, region: str | None) -> str:
    """The sentence for a type the snapshot has no price for in ``region``."""
    where = f"in {region}" if region else "without a known region"
    return (f"{instance_type or 'an unknown instance type'} has no on-demand price {where} in eksbench's price "
            f"snapshot ({aws_prices.SOURCE}, {aws_prices.AS_OF})")


def region_of_zone(zone: str | None) -> str | None:
    """The region of an availability zone's name, None for anything else. EC2 user guide, "Availability Zones": "An
    Availability Zone is represented by a Region code followed by a letter identifier; for example, us-east-1a"."""
    m = re.fullmatch(r"([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]", zone or "")
    return m.group(1) if m else None


# Where the AWS SDKs look for credentials, in order: environment variables, the shared config and credentials
# files (profiles, SSO), the container and EKS Pod Identity endpoints, the EC2 instance's role (boto3, "Configuring
# credentials": https://boto3.amazonaws.com/v1/documentation/api/latest/guide/credentials.html, read 2026-11-27).
# Every command that meets none says so in this one line, whichever client found none. It names no key variable:
# core/ ships to the cluster, where no AWS key may appear (Pod Identity), not even as advice.
CREDENTIALS_HOWTO = ("set AWS_PROFILE (after aws sso login or aws configure), or export an access key pair "
                     "(aws configure export-credentials --format env), or run where an instance or pod role applies")
# botocore.exceptions' names for "no credentials at all" and "half of a key pair" (botocore/exceptions.py).
CREDENTIALS_ERRORS = ("NoCredentialsError", "PartialCredentialsError")
# botocore.exceptions' names for a profile the config files lack (ProfileNotFound, raised by any session or client
# made while AWS_PROFILE names it, or is set empty), and for an SSO session that is gone or expired
# (TokenRetrievalError, SSOTokenLoadError, UnauthorizedSSOTokenError).
PROFILE_ERRORS = ("ProfileNotFound",)
SSO_ERRORS = ("TokenRetrievalError", "SSOTokenLoadError", "UnauthorizedSSOTokenError")
# The error codes of credentials past their time, as a service answers them (a botocore ClientError's
# ``response["Error"]["Code"]``): ExpiredTokenException and RequestExpired are AWS's common errors ("Common Errors",
# https://docs.aws.amazon.com/awsconsolehelpdocs/latest/gsg/common-errors.html), ExpiredToken is STS's and S3's.
EXPIRED_CODES = ("ExpiredToken", "ExpiredTokenException", "RequestExpired")
# How to refresh credentials past their time; RequestExpired also answers a clock more than 15 minutes off.
REFRESH_HOWTO = ("aws sso login, or a new key pair (aws configure export-credentials --format env); and check this "
                 "machine's clock")


def no_credentials(what: str) -> str:
    """``<what>: no AWS credentials found: <how to provide them>``: one line, ``what`` naming the command or the
    place it tried to reach (``audit dev``, ``s3://bucket/prefix``)."""
    return f"{what}: no AWS credentials found: {CREDENTIALS_HOWTO}"


def _chain(error: BaseException | None):
    """``error``, then what it was raised from or while handling, each once."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _named(error: BaseException, names: tuple[str, ...]) -> bool:
    return any(c.__name__ in names for c in type(error).__mro__)


def _word(profile: str) -> str:
    """A profile's name as a command line can take it; ``NAME`` for one that cannot be typed as it is."""
    return profile if re.fullmatch(r"[\w.@+-]{1,64}", profile) else "NAME"


def credentials_problem(error: BaseException, what: str) -> str | None:
    """The one line, led by ``what`` (``run dev``), for the AWS SDK's failures a new user meets first: no
    credentials (``no_credentials``), a profile the config files lack or an empty AWS_PROFILE (naming the profile
    and how to make it), an SSO session never started or expired, credentials past their time (naming how to
    refresh them). None for any other error, or where ``error`` carries none of these as its cause."""
    import os

    for e in _chain(error):
        if _named(e, CREDENTIALS_ERRORS):
            return no_credentials(what)
        if _named(e, PROFILE_ERRORS):
            profile = str((getattr(e, "kwargs", None) or {}).get("profile", os.environ.get("AWS_PROFILE", "")))
            if not profile.strip():
                return f"{what}: AWS_PROFILE is set but empty: unset AWS_PROFILE, or set it to a profile's name"
            name = profile if len(profile) <= 80 else profile[:77] + "..."
            return (f"{what}: the AWS profile {name!r} (AWS_PROFILE) is in neither ~/.aws/config nor "
                    f"~/.aws/credentials: create it (aws configure --profile {_word(profile)}, or aws configure "
                    "sso), or unset AWS_PROFILE")
        if _named(e, SSO_ERRORS):
            profile = os.environ.get("AWS_PROFILE", "").strip()
            login = f"aws sso login --profile {_word(profile)}" if profile else "aws sso login"
            return f"{what}: the AWS SSO session has expired or was never started: run {login}, then retry"
        code = ((getattr(e, "response", None) or {}).get("Error") or {}).get("Code")
        if code in EXPIRED_CODES:
            return f"{what}: the AWS credentials have expired ({code}): refresh them ({REFRESH_HOWTO}), then retry"
    return None
