"""``eksbench prices``: rebuild the catalog's price snapshot (``core/catalog/aws_prices.py``), from files or from AWS.

  prices build FILE...     from AWS Price List offer files, SkyPilot's vms.csv, or the table kept in the catalog
  prices refresh           from the AWS Price List Query API (needs AWS credentials)

Mistakes print one line and exit 2 (a file that is not a price file, no credentials); nothing is written then.
The reading and writing are ``bench.prices``; boto3 is imported by ``refresh`` alone.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from bench.errors import fail

DESCRIPTION = """\
The on-demand prices every cost figure is computed from live in one module of the catalog, core/catalog/aws_prices:
USD per hour of each catalog instance type in each region, with where they come from and when they hold, which every
cost figure prints beside it. A type with no price in a stack's region is named, never priced from another region.
`build` makes the module from files: an AWS Price List bulk offer file per region
(https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/<region>/index.csv), SkyPilot's catalog
(catalogs/v8/aws/vms.csv of skypilot-org/skypilot-catalog), or the table kept in core/catalog/sources/. `refresh`
asks the AWS Price List Query API for today's prices (AWS credentials needed; pricing:GetProducts)."""

EXAMPLES = """\
examples:
  eksbench prices build core/catalog/sources/aws-on-demand.csv --source 'SkyPilot catalog e385a0d' \\
      --as-of 'after the June 2025 P4/P5 price cut'
  eksbench prices build us-east-1.csv us-west-2.csv     offer files, dated by their publication date
  AWS_PROFILE=bench eksbench prices refresh"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prices", help="rebuild the on-demand price snapshot, from price files or the AWS Price List",
                       description=DESCRIPTION, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="prices_command", required=True, metavar="ACTION")
    b = actions.add_parser("build", help="build the snapshot from price files",
                           description="Build the snapshot from AWS Price List offer files (one per region), "
                                       "SkyPilot's vms.csv, or eksbench's price table.")
    b.add_argument("files", nargs="+", metavar="FILE", help="a price file (its first row tells its format)")
    b.add_argument("--source", help="where the prices come from, printed beside every figure (needed for vms.csv "
                                    "and the table; offer files: 'AWS Price List bulk offer files (AmazonEC2)')")
    b.add_argument("--as-of", help="when the prices are known to hold, printed beside every figure (needed for "
                                   "vms.csv and the table; offer files: their publication date)")
    b.add_argument("--region", help="an offer file's region, where it has no 'Region Code' column")
    _out_option(b)
    b.set_defaults(func=cmd_build)
    r = actions.add_parser("refresh", help="fetch today's prices from the AWS Price List Query API",
                           description="Fetch each catalog type's on-demand Linux price from the AWS Price List "
                                       "Query API (pricing.get_products, in us-east-1) and write the snapshot. "
                                       "Needs AWS credentials allowed pricing:GetProducts.")
    r.add_argument("--region", action="append", default=[], metavar="REGION",
                   help="only this region (repeat for more); default: every region AWS prices the types in")
    _out_option(r)
    r.set_defaults(func=cmd_refresh)


def _out_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="PATH", help="where to write the module (default: the snapshot this eksbench "
                                                 "reads, core/catalog/aws_prices in its checkout)")


def _out(args: argparse.Namespace) -> Path:
    if args.out:
        return Path(args.out)
    import core.catalog

    return Path(core.catalog.__file__).parent / "aws_prices.py"


def cmd_build(args: argparse.Namespace) -> int:
    from bench.prices import snapshot
    from bench.prices.sources import SourceError
    from core.catalog.aws import INSTANCE_TYPES

    argv = ["eksbench", "prices", "build", *args.files]
    for flag, value in (("--source", args.source), ("--as-of", args.as_of), ("--region", args.region)):
        argv += [flag, value] if value else []
    try:
        snap = snapshot.from_files(args.files, types=list(INSTANCE_TYPES), made_by=shlex.join(argv),
                                   source=args.source, as_of=args.as_of, region=args.region)
    except SourceError as e:
        return fail(str(e))
    return _write(snap, _out(args))


def cmd_refresh(args: argparse.Namespace) -> int:
    import datetime

    from bench.prices import pricing_api, snapshot
    from bench.prices.sources import SourceError
    from core.catalog.aws import INSTANCE_TYPES, credentials_problem

    argv = ["eksbench", "prices", "refresh"] + [x for r in args.region for x in ("--region", r)]
    try:
        prices = pricing_api.fetch(pricing_api.client(), types=list(INSTANCE_TYPES), regions=args.region)
    except SourceError as e:
        return fail(str(e))
    except Exception as e:  # noqa: BLE001 - botocore's NoCredentialsError, ClientError: one line, exit 2
        if (line := credentials_problem(e, "prices refresh")) is not None:
            return fail(line)
        return fail(f"prices refresh: the AWS Price List Query API answered {type(e).__name__}: "
                    f"{' '.join(str(e).split())[:300]}")
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    snap = snapshot.Snapshot(prices=prices, source=pricing_api.SOURCE, as_of=f"fetched {today}",
                             made_by=shlex.join(argv))
    return _write(snap, _out(args))


def _write(snap, out: Path) -> int:
    from bench.prices import snapshot
    from core.catalog.aws import INSTANCE_TYPES

    if not snap.prices:
        return fail(f"no price for any of the catalog's {len(INSTANCE_TYPES)} instance types in what was read: "
                    f"{out} is left as it was")
    try:
        snapshot.write(snapshot.render(snap, list(INSTANCE_TYPES)), out)
    except OSError as e:
        return fail(f"--out {out}: cannot be written ({e.strerror or e})")
    priced = [k for k, p in snap.prices.items() if p is not None]
    regions = {r for _, r in priced}
    print(f"wrote {out}: {len(priced)} prices of {len({t for t, _ in priced})} instance types in {len(regions)} "
          f"regions ({snap.source}, {snap.as_of})")
    never = [t for t in INSTANCE_TYPES if not any(it == t for it, _ in priced)]
    if never:
        print(f"no price in any region: {', '.join(never)} (plans and reports name them unpriced)")
    return 0
