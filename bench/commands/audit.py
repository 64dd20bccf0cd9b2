"""``python -m bench audit <stack>``: list what a destroyed stack left in AWS, with the command to delete each
(the audit itself: ``bench.cloud.audit``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cloud.audit import audit
from bench.errors import fail
from bench.project import add_project_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="list what a destroyed stack left in AWS, with the command to delete each")
    p.add_argument("stack", help="stack name (Pulumi.<stack>.yaml)")
    add_project_options(p, results=False)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from core.config.fields import ConfigError

    try:
        return audit(args.stack, root=Path(args.project_dir))
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}:\n  " + "\n  ".join(e.problems))
    except Exception as e:  # noqa: BLE001 - botocore's NoCredentialsError, ClientError: one line, exit 2
        print(f"error: audit {args.stack}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
