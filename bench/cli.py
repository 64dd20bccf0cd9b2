"""The eksbench command line: one module per subcommand, each with ``register(subparsers)``.

Heavy libraries (Pulumi's engine, boto3, torch) are imported inside the commands that
need them, so ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("bench.plan", "bench.run", "bench.data", "bench.cloud", "bench.report")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="eksbench: distributed training benchmarks on AWS EKS, one Pulumi stack per experiment.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
