"""``eksbench run <stack>`` on AWS: preflight, then the lifecycle with the cloud backend.

Preflight refusals print one line and exit 2 before anything is created (``bench.cloud.preflight``).
Then ``bench.lifecycle.run_lifecycle`` drives ``bench.cloud.backend.CloudBackend``: ``pulumi up``,
watch, ``pulumi destroy`` (always; ``--keep`` scales the GPU groups to zero instead), collect.
The run's deadline defaults to twice the estimated provisioning time + the experiments' window
+ 10 min of teardown; ``--max-cost`` both refuses a run estimated above it and stops one that
has spent it (keeping the teardown's cost in reserve).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench import progress
from bench.cloud import run_timeline
from bench.errors import USAGE_ERROR, fail
from bench.project import results_root_problem
from bench.results.timeline import PREFLIGHT
from core.catalog import aws as catalog
from core.config.overrides import Overrides
from core.contract.names import LOCAL_RESULTS_ROOT
from program.stack_files import ROOT

# gRPC (Pulumi's engine events) logs a line on every fork while its threads run; we fork the CLI.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


@dataclass
class CloudRunOptions:
    root: Path = ROOT
    results_root: Path = Path(LOCAL_RESULTS_ROOT)
    max_cost: float | None = None
    keep: bool = False
    deadline_minutes: float | None = None
    poll: float = 15.0
    progress_every: float = 30.0
    resume: bool = False
    confirm: Callable[[list[str]], bool] | None = None  # asked once config and cost are checked (preflight)
    overrides: Overrides = field(default_factory=Overrides)  # --set and --experiment (core.config.overrides)


@dataclass
class CloudOutcome:
    code: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    refusal: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    overhead_s: float | None = None  # last summary seen -> destroy started


def run_stack(stack: str, opts: CloudRunOptions) -> CloudOutcome:
    from bench.cloud.backend import CloudBackend
    from bench.cloud.preflight import Refusal, preflight
    from bench.lifecycle import Control, run_lifecycle

    if unusable := results_root_problem(opts.results_root):  # results come home there at the end: say so now
        return CloudOutcome(code=USAGE_ERROR, refusal=unusable)
    results_root = Path(opts.results_root).resolve()
    started = time.time()
    try:
        ready = preflight(stack, Path(opts.root), max_cost=opts.max_cost, results_root=results_root,
                          resume=opts.resume, overrides=opts.overrides, confirm=opts.confirm,
                          deadline_minutes=opts.deadline_minutes)
    except Refusal as e:
        return CloudOutcome(code=USAGE_ERROR, refusal=str(e))
    timeline = run_timeline.recorder(stack, ready, started=started)
    timeline.span(PREFLIGHT, started, time.time(), "eksbench run's clock: config, cost, CLI, credentials, quotas, data")
    deadline = opts.deadline_minutes or ready.default_deadline_minutes
    progress.line(f"run {ready.cfg.run_id} of stack {stack}: deadline {deadline:.0f} min"
                  + (f", budget ${opts.max_cost:.2f}" if opts.max_cost is not None else "")
                  + ("; --keep: the stack stays up, GPU nodes scaled to zero" if opts.keep else ""))
    # No price, no budget: preflight refuses --max-cost where the stack has an instance type priced nowhere here.
    ctl = Control(deadline_s=deadline * 60, hourly_usd=ready.hourly_usd or 0.0, max_cost_usd=opts.max_cost,
                  prices=f"instances at {ready.prices}; the rest at {catalog.OTHER_PRICES}")
    backend = CloudBackend(stack=stack, ready=ready, root=Path(opts.root), results_root=results_root,
                           keep=opts.keep, poll=opts.poll, progress_every=opts.progress_every, resume=opts.resume,
                           timeline=timeline)
    outcome = run_lifecycle(backend, ctl)
    _write_timeline(timeline, backend, ready, output_note=outcome.output_note)
    overhead = None
    if backend.last_summary_at is not None and backend.teardown_started_at is not None:
        overhead = backend.teardown_started_at - backend.last_summary_at
    return CloudOutcome(code=outcome.code, rows=outcome.rows, timings=outcome.timings, overhead_s=overhead)


def _write_timeline(timeline: Any, backend: Any, ready: Any, *, output_note: str | None = None) -> None:
    """``timeline.json`` beside the run's results (./results and the bucket), and its figures printed;
    ``output_note``: why the run's output stopped before its end (the run's record keeps it as ``output``)."""
    from core.contract.results_location import results_bucket
    from core.contract.s3_uri import parse_s3_uri

    doc = timeline.document()
    if output_note:
        doc["output"] = output_note
    bucket = backend.outputs.get("results_bucket")
    if not bucket and backend.outputs.get("results_prefix"):
        bucket = parse_s3_uri(backend.outputs["results_prefix"])[0]
    if not bucket:
        try:
            bucket = results_bucket(ready.cfg.results, ready.home, region=ready.cfg.region)
        except ValueError:
            bucket = None
    try:
        s3 = backend.s3 if bucket else None
    except Exception:  # noqa: BLE001 - no client, no upload; the local copy is written anyway
        bucket, s3 = None, None
    where = run_timeline.write(doc, run=backend.run_results, results_root=backend.results_root, bucket=bucket, s3=s3)
    for line in run_timeline.summary_lines(doc):
        progress.line(line)
    if where:
        progress.line(f"timeline: {', '.join(where)}")


def run_cloud(args) -> int:
    """``eksbench run <stack>`` without --local; the flags only a local run reads were refused before
    (``bench.commands.run.flag_problems``). Without --yes it asks before it creates anything, on a terminal only."""
    from bench.cloud.confirm import ask, terminal_problem

    if args.run_id:
        from core.config.fields import ConfigError
        from core.contract.results_location import quoted
        from program.stack_files import load_stack_config

        try:
            cfg = load_stack_config(args.stack, Path(args.project_dir), overrides=args.overrides)
        except ConfigError as e:
            return fail(f"invalid config for stack {args.stack!r}: " + "; ".join(e.problems))
        if args.run_id != cfg.run_id:
            return fail(f"--run-id={quoted(args.run_id)}: on AWS the run id is the stack's eksbench:run_id "
                        f"({cfg.run_id}); set it in Pulumi.{args.stack}.yaml")
    if problem := terminal_problem(f"run {args.stack}", yes=args.yes, interactive=sys.stdin.isatty()):
        return fail(problem)
    poll = args.poll or CloudRunOptions.poll
    outcome = run_stack(args.stack, CloudRunOptions(
        root=Path(args.project_dir), results_root=Path(args.results_root), max_cost=args.max_cost, keep=args.keep,
        deadline_minutes=args.deadline, poll=poll, progress_every=max(args.progress_every, poll),
        resume=args.resume, overrides=args.overrides,
        confirm=lambda lines: ask(lines, yes=args.yes, write=progress.line)))
    if outcome.refusal:
        print(f"error: {outcome.refusal}", file=sys.stderr)
        return USAGE_ERROR
    return outcome.code
