"""The eksbench command line: one module per subcommand in ``bench/commands/``, each with ``register(subparsers)``.

Heavy libraries (Pulumi's engine, boto3, torch) are imported inside the commands that
need them, so ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

COMMANDS = tuple(f"bench.commands.{name}" for name in
                 ("plan", "run", "data", "cloud", "observe", "report", "audit", "compare"))


class Terminated(KeyboardInterrupt):
    """SIGTERM outside a run's lifecycle (which handles its own signals): unwind, exit 143."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="eksbench: distributed training benchmarks on AWS EKS, one Pulumi stack per experiment.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def _terminate(_signum, _frame) -> None:
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args) or 0)
    except Terminated:
        print("terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    finally:
        signal.signal(signal.SIGTERM, previous)
