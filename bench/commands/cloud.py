"""``eksbench up|preview|destroy|outputs <stack>``: the real cloud path, via the Automation API."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.errors import fail
from bench.project import add_project_options


def register(sub: argparse._SubParsersAction) -> None:
    for verb, text in (("preview", "pulumi preview against AWS: what would change (needs the Pulumi CLI and AWS)"),
                       ("up", "pulumi up only: build the stack and start its Jobs; nothing waits or tears down"),
                       ("destroy", "pulumi destroy: remove everything but the results bucket"),
                       ("outputs", "print the stack outputs (the results' s3:// URIs) as JSON")):
        p = sub.add_parser(verb, help=text, description=text[0].upper() + text[1:] + ". `eksbench run STACK` does "
                           "the whole run (build, train, collect, tear down) in one command.",
                           epilog=f"example: eksbench {verb} dev")
        p.add_argument("stack", help="stack name (Pulumi.<stack>.yaml)")
        add_project_options(p, results=False)
        p.set_defaults(func=main, verb=verb)


def main(args: argparse.Namespace) -> int:
    from bench import automation
    from core.config.fields import ConfigError

    root = Path(args.project_dir)
    try:
        if args.verb == "preview":
            automation.preview(args.stack, root)
        elif args.verb == "up":
            print(json.dumps(automation.up(args.stack, root), indent=1, default=str))
        elif args.verb == "destroy":
            automation.destroy(args.stack, root)
        else:
            print(json.dumps(automation.outputs(args.stack, root), indent=1, default=str))
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}:\n  " + "\n  ".join(e.problems))
    except automation.AutomationError as e:
        return fail(str(e))
    return 0
