"""``python -m bench up|preview|destroy|outputs <stack>``: the real cloud path, via the Automation API."""

from __future__ import annotations

import argparse
import json

from bench.errors import fail


def register(sub: argparse._SubParsersAction) -> None:
    for verb, text in (("preview", "pulumi preview, against AWS"), ("up", "pulumi up: build and run the experiment"),
                       ("destroy", "pulumi destroy: remove everything but the results"),
                       ("outputs", "print the stack outputs (results URIs) as JSON")):
        p = sub.add_parser(verb, help=text)
        p.add_argument("stack", help="stack name (Pulumi.<stack>.yaml)")
        p.set_defaults(func=main, verb=verb)


def main(args: argparse.Namespace) -> int:
    from bench import automation
    from core.config.fields import ConfigError

    try:
        if args.verb == "preview":
            automation.preview(args.stack)
        elif args.verb == "up":
            print(json.dumps(automation.up(args.stack), indent=1, default=str))
        elif args.verb == "destroy":
            automation.destroy(args.stack)
        else:
            print(json.dumps(automation.outputs(args.stack), indent=1, default=str))
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}:\n  " + "\n  ".join(e.problems))
    except automation.AutomationError as e:
        return fail(str(e))
    return 0
