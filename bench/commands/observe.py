"""``bench status <stack>[/<run>[/<experiment>]] [--json] [--cloud]`` and ``bench logs <stack>[/<run>[/<experiment>]]
[<experiment>] [--tail N] [--node K] [-t] [-f]``: the run handle is ``bench.automation.run_handle``'s.

status: the stack's state when the Pulumi CLI answers, asked once the stack has been on AWS from here or with
    ``--cloud`` (last operation, result, resources held, what autostop did), then one row per experiment run
    (of the run or experiment the handle names), local and S3 together, oldest run first: run, experiment, status
    and why it stopped, start (UTC), duration, throughput (samples/s, a language model's tokens/s per GPU, or the
    all-reduce's peak bus bandwidth), a language model's MFU, dollars per billion tokens and validation loss, energy
    per result and where the results are. ``--json``: the same as one JSON document.
logs: the experiment's node logs, from where they are: the cluster while its pods run (``--follow``
    streams), S3 once the launcher uploaded them, or a local run's files (``--follow`` tails them until
    summary.json appears).

Each backend of the lifecycle says what it knows (``status``, ``logs``: ``bench.cloud.observe`` for AWS,
``bench.local.observe`` for local runs); ``bench.automation`` asks both; this module prints.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from bench.automation import AutomationError, experiment_logs, stack_status
from bench.errors import fail
from bench.project import add_project_options
from bench.terminal import duration, energy, safe, safe_line, shorten, show, table, throughput, with_energy

WHY_WIDTH = 48  # characters of why a run stopped shown in the status column (--json has it whole)


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "status", help="the stack's state and every run: status, start, duration, throughput, results",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="What the stack holds on AWS, once it was deployed from here or with --cloud (when the Pulumi\n"
                    "CLI can tell: its last operation, the resources it keeps, what autostop scaled down), then one\n"
                    "row per experiment of every run (or of the run named), local and on S3, oldest run first: its\n"
                    "status (and why it stopped, when it did not succeed), when it started (UTC), how long it ran,\n"
                    "its throughput (samples/s; for an all-reduce experiment the peak bus bandwidth; for a language\n"
                    "model tokens/s per GPU, with its MFU, dollars per billion tokens and validation loss), its\n"
                    "energy per result and where its results are.",
        epilog="examples:\n  eksbench status dev\n  eksbench status dev/20261127-091239\n"
               "  eksbench status dev --cloud --json | jq '.runs[-1]'")
    s.add_argument("stack", metavar="STACK[/RUN[/EXPERIMENT]]",
                   help="the stack, as in Pulumi.<stack>.yaml (e.g. dev), or one run or experiment of it "
                        "(dev/20261127-091239, dev/20261127-091239/resnet50-synthetic)")
    s.add_argument("--json", action="store_true",
                   help="print one JSON document (the stack's state, notes and a list of runs) instead of the table")
    s.add_argument("--cloud", action="store_true",
                   help="ask Pulumi and S3 for the stack's state and runs even where this machine has no sign of it "
                        "on AWS (by default only once eksbench drove Pulumi for it from this project, or a cloud "
                        "run of it is under the results root)")
    add_project_options(s)
    s.set_defaults(func=cmd_status)
    g = sub.add_parser(
        "logs", help="an experiment's node logs: from the cluster while it runs, S3 or local files after",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print an experiment's node logs, each line prefixed with its node (node-0: ...). They come\n"
                    "from the cluster while its pods run, from S3 once they are uploaded, or from a local run's\n"
                    "folder; by default from the latest run. A line shows what a terminal would: a carriage\n"
                    "return starts it over (a progress bar shows its last state), and past 16 KiB it is cut once,\n"
                    "saying how many bytes were dropped; characters that would drive or reorder the terminal\n"
                    "(escape sequences, bidirectional and zero-width characters) show as escapes (\\x1b, \\u202e).",
        epilog="examples:\n  eksbench logs dev resnet50-synthetic --tail 20\n"
               "  eksbench logs dev/20261127-091239/resnet50-synthetic\n"
               "  eksbench logs dev cifar10-elastic --node 1 --timestamps --follow")
    g.add_argument("stack", metavar="STACK[/RUN[/EXPERIMENT]]",
                   help="the stack, as in Pulumi.<stack>.yaml (e.g. dev), or one run or experiment of it "
                        "(dev/20261127-091239/resnet50-synthetic)")
    g.add_argument("experiment", nargs="?",
                   help="an experiment of the stack (its name in Pulumi.<stack>.yaml), unless STACK names it")
    g.add_argument("--run-id", metavar="ID",
                   help="which run (a folder under the results root, e.g. 20261127-091239: 1-64 letters, digits, "
                        "'.', '_' or '-'); default: the latest local run, or the stack's run_id on AWS")
    g.add_argument("--tail", metavar="N", type=lines,
                   help="only the last N lines of each node's log (with --follow: start there); default: all "
                        "(the last 200 from the cluster)")
    g.add_argument("--node", metavar="K",
                   help="only node K's log: 1 or node-1 (default: every node's, one after another)")
    g.add_argument("--timestamps", "-t", action="store_true",
                   help="show when each line was written (UTC, to the millisecond) after its node; a line logged "
                        "before this was recorded shows '-'")
    g.add_argument("--follow", "-f", action="store_true",
                   help="keep printing new lines until the experiment ends (on the cluster: one node's)")
    add_project_options(g)
    g.set_defaults(func=cmd_logs)


def lines(value: str) -> int:
    """``--tail``'s value: a whole number of lines, 0 or more."""
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of lines (0 or more), e.g. 20")
    return int(value)


# --- status -------------------------------------------------------------------------------------------


def autostop_lines(run_id: str, record: dict[str, Any]) -> list[str]:
    """What the cluster's autostop controller did in a run: when, why, which groups from what size, which
    Jobs it suspended (a stack whose GPU groups Cluster Autoscaler sizes)."""
    groups = [f"{g['name']} {(g['before'] if isinstance(g.get('before'), dict) else {}).get('desiredSize', '?')}->0"
              for g in record.get("node_groups") or [] if g.get("changed") is not False]
    suspended = record.get("suspended_jobs") or []
    return [f"  autostop in run {run_id}: at {record.get('decided_at') or '?'} scaled "
            + (", ".join(groups) or "nothing")
            + (f", suspended {', '.join(suspended)}" if suspended else "")
            + f": {record.get('reason') or '(no reason given)'}"]


def started(row: dict[str, Any]) -> str | None:
    """``2026-11-27 09:12:39``: a row's start in UTC, to the second; ``invalid time`` where its summary gives
    one that is no time (``0001-01-01T00:00:00+14:00`` is in year 0 in UTC); None where it gives none."""
    from bench.results.timeline import INVALID_TIME, parse_iso, utc_text

    return INVALID_TIME if row.get("started_invalid") else utc_text(parse_iso(row.get("started_at")))


def status_cell(row: dict[str, Any]) -> str:
    """The status, with why it stopped (when it did not succeed) and what the run is marked with (a CPU shared
    with another local run), cut at a word to WHY_WIDTH characters."""
    from bench.results.overview import why_stopped

    told = [why_stopped(row) if row.get("status") != "succeeded" else "", *(row.get("flags") or [])]
    why = "; ".join(t for t in told if t)
    return f"{row.get('status')}" + (f" ({shorten(why, WHY_WIDTH)})" if why else "")


def where(row: dict[str, Any]) -> str:
    """Where the results are: the local folder (as the user would type it) or the s3:// URI."""
    local = row.get("local") or (row["results"] if not str(row["results"]).startswith("s3://") else None)
    return show(Path(local)) if local else str(row["results"])


def lm_throughput(row: dict[str, Any]) -> str:
    """The throughput cell: a language model's tokens/s per GPU (and in all) in place of its samples/s (sequences),
    else ``bench.terminal.throughput``'s (samples/s, or the all-reduce's peak bus bandwidth)."""
    per, total = row.get("tokens_per_s_per_device"), row.get("tokens_per_s")
    if per is None and total is None:
        return throughput(row)
    return f"{per:,.0f} tokens/s/GPU ({total:,.0f} in all)" if per is not None else f"{total:,.0f} tokens/s"


def lm_cell(row: dict[str, Any]) -> str:
    """A language model's MFU (for float8 against both peaks, labelled), dollars per billion tokens and last
    validation loss: ``MFU 35.1%, $318.52/B tokens, val loss 2.71``; ``-`` for any other run."""
    mfu, fp8, usd, val = (row.get(k) for k in ("mfu", "mfu_fp8_peak", "usd_per_billion_tokens", "final_val_loss"))
    parts = ([f"MFU {mfu:.1%}" + (f" (bf16 peak), {fp8:.1%} (fp8 peak)" if fp8 is not None else "")]
             if mfu is not None else [f"MFU {fp8:.1%} (fp8 peak)"] if fp8 is not None else [])
    parts += [f"${usd:,.2f}/B tokens"] if usd is not None else []
    parts += [f"val loss {val:.4g}"] if val is not None else []
    return ", ".join(parts) or "-"


def lm_energy(row: dict[str, Any]) -> str:
    """The energy cell: a language model's kWh per billion tokens (and the run's kWh), else energy per sample."""
    per, kwh = row.get("kwh_per_billion_tokens"), row.get("kwh")
    if per is None:
        return energy(row)
    return f"{per:.3g} kWh/B tokens" + (f", {kwh:.3g} kWh" if kwh is not None else "")


def status_table(rows: list[dict[str, Any]]) -> str:
    from bench.results.overview import label

    head = ("RUN", "EXPERIMENT", "STATUS", "STARTED (UTC)", "DURATION", "THROUGHPUT", "LANGUAGE MODEL", "ENERGY",
            "RESULTS")
    body = [(r["run"], label(r), status_cell(r), started(r), duration(r.get("wall_s")), lm_throughput(r),
             lm_cell(r), lm_energy(r), where(r)) for r in rows]
    head, body = with_energy(head, body)
    return table(*with_energy(head, body, column=head.index("LANGUAGE MODEL") - len(head)))


def render_status(st: dict[str, Any]) -> str:
    lines = [f"stack {st['stack']}"]
    state = st["state"]
    if state:
        lines.append(f"  pulumi: last {state['last']} {state['result']}"
                     + (f" at {state['ended']}" if state["ended"] else "")
                     + f", {state['resources']} resource(s) held"
                     + (" (costs money: `eksbench destroy " + st["stack"] + "`)" if state["resources"] else ""))
        if state["resources"] and st.get("after_autostop_usd") is not None:
            lines.append(f"  with the GPU groups at zero (autostop, --keep) the stack still bills about "
                         f"${st['after_autostop_usd']:.2f}/h until destroyed: the control plane, NAT, system nodes "
                         f"and storage (EFS also per GB-month stored)")
            if st.get("after_autostop_prices"):
                lines.append(f"    ({st['after_autostop_prices']})")
        elif state["resources"] and st.get("after_autostop_prices"):
            lines.append(f"  with the GPU groups at zero (autostop, --keep) the stack still bills until destroyed, "
                         f"at a rate not estimated: {st['after_autostop_prices']}")
    for note in st["notes"]:
        lines.append(f"  {note}")
    for run_id, record in (st.get("autostop") or {}).items():
        lines += autostop_lines(run_id, record)
    rows = st.get("runs") or []
    if rows:
        lines += ["", status_table(rows)]
    else:
        lines.append(f"  no runs yet (local results: none; S3: {st.get('s3_prefix') or 'not known'})" if st.get(
            "cloud", True) else "  no runs yet (local results: none; S3 not asked: --cloud asks it)")
    return "\n".join(lines)


def status_document(st: dict[str, Any]) -> dict[str, Any]:
    """``--json``: what the table shows, whole (the stack's outputs stay out: they hold its kubeconfig)."""
    from bench.results.overview import LM_STATUS

    keys = ("run", "experiment", "repeat", "status", "stop_reason", "error", "started_at", "wall_s", "steps",
            "samples_per_s", "samples_per_s_per_process", "busbw_peak_gbps", "busbw_peak_at_bytes", "message_sizes",
            "flags", "joules_per_sample", "kwh", *LM_STATUS, "results", "local", "s3")
    return {"stack": st["stack"], "cloud": st.get("cloud"), "state": st["state"],
            "after_autostop_usd": st.get("after_autostop_usd"),
            "after_autostop_prices": st.get("after_autostop_prices"),
            "notes": st["notes"], "autostop": st.get("autostop") or {}, "s3_prefix": st.get("s3_prefix"),
            "runs": [{k: r.get(k) for k in keys} for r in st.get("runs") or []]}


def cmd_status(args: argparse.Namespace) -> int:
    from core.config.fields import ConfigError
    from core.contract import strict_json

    try:
        with warnings.catch_warnings(record=True) as caught:  # a bad file from a run: one safe line each
            warnings.simplefilter("always")
            st = stack_status(args.stack, Path(args.project_dir), Path(args.results_root), cloud=args.cloud or None)
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}: " + "; ".join(e.problems))
    # a handle that is not one, or names a run or an experiment that is not there; AWS credentials that cannot serve
    except (ValueError, AutomationError) as e:
        return fail(safe_line(e))
    for w in caught:
        print(safe_line(f"warning: {w.message}"), file=sys.stderr)
    # JSON escapes every control character (ensure_ascii), so a run's text cannot reach the terminal raw
    print(strict_json.dumps(status_document(st), indent=2) if args.json else safe(render_status(st)))
    return 0


# --- logs ---------------------------------------------------------------------------------------------


def cmd_logs(args: argparse.Namespace) -> int:
    from core.config.fields import ConfigError

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for line in experiment_logs(args.stack, args.experiment, root=Path(args.project_dir),
                                        results_root=Path(args.results_root), run_id=args.run_id,
                                        follow=args.follow, tail=args.tail, node=args.node,
                                        timestamps=args.timestamps):
                print(safe(line), flush=True)
        for w in caught:
            print(safe_line(f"warning: {w.message}"), file=sys.stderr)
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}: " + "; ".join(e.problems))
    except (ValueError, FileNotFoundError, AutomationError) as e:
        return fail(safe_line(e))
    return 0  # a reader that went away (`logs ... | head`) ends the command at the top, quietly (bench.cli)
