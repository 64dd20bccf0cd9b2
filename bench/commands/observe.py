"""``python -m bench status <stack>`` and ``python -m bench logs <stack> <experiment> [--follow]``.

status: the stack's state when the Pulumi CLI answers (last operation, result, resources
    held), then each run with each experiment's status, from the local results
    (``./results/<stack>/<run-id>/``) and from S3 (the stack's results prefix: the
    ``results_prefix`` output while the stack exists, else ``results.bucket`` or the home stack's bucket).
logs: the experiment's node logs, from where they are: the cluster while its pods run
    (``--follow`` streams), S3 once the launcher uploaded them, or a local run's files
    (``--follow`` tails them until summary.json appears).

Each backend of the lifecycle says what it knows (``status``, ``logs``: ``bench.cloud.observe`` for AWS,
``bench.local.backend`` for local runs); ``bench.automation`` asks both; this module prints.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from bench.automation import experiment_logs, stack_status
from bench.errors import fail
from bench.project import add_project_options
from bench.terminal import safe, safe_line


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("status", help="stack state and each run's experiment status (local and S3)")
    s.add_argument("stack")
    add_project_options(s)
    s.set_defaults(func=cmd_status)
    g = sub.add_parser("logs", help="an experiment's logs: cluster while it runs, S3 afterwards, local files")
    g.add_argument("stack")
    g.add_argument("experiment")
    g.add_argument("--run-id", metavar="ID", help="default: the latest run (local) / the stack's run_id (AWS)")
    g.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until the experiment ends")
    add_project_options(g)
    g.set_defaults(func=cmd_logs)


# --- status -------------------------------------------------------------------------------------------


def autostop_lines(run_id: str, record: dict[str, Any]) -> list[str]:
    """What the cluster's autostop controller did in a run: when, why, which groups from what size."""
    groups = [f"{g['name']} {(g['before'] if isinstance(g.get('before'), dict) else {}).get('desiredSize', '?')}->0"
              for g in record.get("node_groups") or [] if g.get("changed") is not False]
    return [f"      autostop: at {record.get('decided_at') or '?'} scaled "
            + (", ".join(groups) or "nothing") + f": {record.get('reason') or '(no reason given)'}"]


def render_status(st: dict[str, Any]) -> str:
    lines = [f"stack {st['stack']}"]
    state = st["state"]
    if state:
        lines.append(f"  pulumi: last {state['last']} {state['result']}"
                     + (f" at {state['ended']}" if state["ended"] else "")
                     + f", {state['resources']} resource(s) held"
                     + (" (costs money: `python -m bench destroy " + st["stack"] + "`)" if state["resources"] else ""))
        if state["resources"] and st.get("after_autostop_usd") is not None:
            lines.append(f"  with the GPU groups at zero (autostop, --keep) the stack still bills about "
                         f"${st['after_autostop_usd']:.2f}/h until destroyed: the control plane, NAT, system nodes "
                         f"and storage (infra/cluster/estimate.py; EFS also per GB-month stored)")
    for note in st["notes"]:
        lines.append(f"  {note}")
    for where, runs in (("local", st["local_runs"]), (st.get("s3_prefix", "S3"), st["s3_runs"])):
        if not runs:
            continue
        lines.append(f"  runs in {where}:")
        for run_id, exps in runs.items():
            lines.append(f"    {run_id}")
            lines += [f"      {name}: {status}" for name, status in exps.items()] or ["      (no experiments)"]
            if run_id in st.get("autostop", {}) and where != "local":
                lines += autostop_lines(run_id, st["autostop"][run_id])
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    from core.config.fields import ConfigError

    try:
        with warnings.catch_warnings(record=True) as caught:  # a bad file from a run: one safe line each
            warnings.simplefilter("always")
            st = stack_status(args.stack, Path(args.project_dir), Path(args.results_root))
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}: " + "; ".join(e.problems))
    for w in caught:
        print(safe_line(f"warning: {w.message}"), file=sys.stderr)
    print(safe(render_status(st)))
    return 0


# --- logs ---------------------------------------------------------------------------------------------


def cmd_logs(args: argparse.Namespace) -> int:
    from core.config.fields import ConfigError

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for line in experiment_logs(args.stack, args.experiment, root=Path(args.project_dir),
                                        results_root=Path(args.results_root), run_id=args.run_id, follow=args.follow):
                print(safe(line), flush=True)
        for w in caught:
            print(safe_line(f"warning: {w.message}"), file=sys.stderr)
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}: " + "; ".join(e.problems))
    except (ValueError, FileNotFoundError) as e:
        return fail(str(e))
    except BrokenPipeError:
        sys.stderr.close()
    return 0
