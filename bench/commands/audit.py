"""``eksbench audit <stack>``: list what a destroyed stack left in AWS, with the command to delete each
(the audit itself: ``bench.cloud.audit``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cloud.audit import audit
from bench.errors import fail
from bench.project import add_project_options
from core.catalog.aws import credentials_problem


DESCRIPTION = """\
List what a stack left in AWS after pulumi destroy, with the AWS CLI command that deletes each.

It looks for everything still tagged with the stack, and for what EKS and Kubernetes are known
to leave untagged: network interfaces and security groups in the stack's VPC, load balancers,
volumes made for the cluster, and the control plane's log group. eksbench run audits after its own
destroy; run this after a destroy of your own, or when a run was cut short. It needs the same AWS
credentials as the run, and only reads.

exit codes:
  0  nothing is left
  1  something is left (each is listed with its delete command)
  2  the audit could not run (no credentials, a bad stack file)"""

EXAMPLES = """\
examples:
  eksbench audit dev
  AWS_PROFILE=bench eksbench audit p5-fsx"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="list what a destroyed stack left in AWS, with the command to delete each",
                       description=DESCRIPTION, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stack", help="stack name, e.g. dev (reads Pulumi.<stack>.yaml for its region and VPC)")
    add_project_options(p, results=False)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from core.config.fields import ConfigError

    try:
        return audit(args.stack, root=Path(args.project_dir))
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}:\n  " + "\n  ".join(e.problems))
    except Exception as e:  # noqa: BLE001 - botocore's NoCredentialsError, ClientError: one line, exit 2
        if line := credentials_problem(e, f"audit {args.stack}"):  # none, a profile not there, expired
            return fail(line)
        return fail(f"audit {args.stack}: {type(e).__name__}: {' '.join(str(e).split())}")
