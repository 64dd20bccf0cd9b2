"""``eksbench up|preview|destroy|outputs <stack>``: the real cloud path, via the Automation API."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.errors import fail
from bench.project import add_project_options

# The verbs that create or delete resources: each shows what and at what cost an hour, then asks Proceed? [y/N].
ASKS = {"up": "\n\nIt shows what it creates and what that costs an hour, then asks Proceed? [y/N]; --yes answers yes.",
        "destroy": "\n\nIt shows what it deletes and what that cost an hour, then asks Proceed? [y/N]; --yes answers "
                   "yes."}


def register(sub: argparse._SubParsersAction) -> None:
    for verb, text in (("preview", "pulumi preview against AWS: what would change (needs the Pulumi CLI and AWS)"),
                       ("up", "pulumi up only: build the stack and start its Jobs; nothing waits or tears down"),
                       ("destroy", "pulumi destroy: remove everything but the results bucket"),
                       ("outputs", "print the stack outputs (the results' s3:// URIs) as JSON")):
        p = sub.add_parser(verb, help=text, description=text[0].upper() + text[1:] + ". `eksbench run STACK` does "
                           "the whole run (build, train, collect, tear down) in one command.",
                           epilog=f"example: eksbench {verb} dev" + ASKS.get(verb, ""))
        p.add_argument("stack", help="stack name (Pulumi.<stack>.yaml)")
        if verb in ASKS:
            p.add_argument("-y", "--yes", action="store_true", help=f"{verb} without asking (needed where stdin is "
                           "not a terminal)")
        add_project_options(p, results=False)
        p.set_defaults(func=main, verb=verb)


def main(args: argparse.Namespace) -> int:
    from bench import automation
    from bench.cloud.confirm import terminal_problem
    from core.config.fields import ConfigError
    from program.stack_files import check_stack_name

    root = Path(args.project_dir)
    try:
        if args.verb in ASKS:
            check_stack_name(args.stack)
            if problem := terminal_problem(f"{args.verb} {args.stack}", yes=args.yes, interactive=sys.stdin.isatty()):
                return fail(problem)
        if args.verb == "preview":
            automation.preview(args.stack, root)
        elif args.verb == "up":
            print(json.dumps(automation.up(args.stack, root, yes=args.yes), indent=1, default=str))
        elif args.verb == "destroy":
            automation.destroy(args.stack, root, yes=args.yes)
        else:
            print(json.dumps(automation.outputs(args.stack, root), indent=1, default=str))
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}:\n  " + "\n  ".join(e.problems))
    except automation.AutomationError as e:
        return fail(str(e))
    return 0
