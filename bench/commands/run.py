"""``eksbench run <stack>...``: run a stack's experiments, collect the results, always tear down.

``--local`` runs them on this machine, scaled down (``bench.local.backend``); without it the
whole AWS lifecycle runs (``bench.cloud.run``: preflight, ``pulumi up``, watch, teardown,
collect). Both go through one orchestrator, ``bench.lifecycle.run_lifecycle``. Results land
in ``./results/<stack>/<run-id>/<experiment>/``, a results table is printed at the end.
Exit codes: 0 all experiments succeeded; 1 an experiment, the environment or the teardown
failed; 2 bad input or a preflight refusal; 130/143 interrupted (SIGINT/SIGTERM), after
teardown. Several stacks run as one child process each (``bench.commands.multi``).
torch is never imported here (the children import it).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from bench.commands.settings import add_set_option, overrides_of
from bench.errors import USAGE_ERROR, fail
from bench.project import add_project_options, nearest_existing, results_root_problem
from core.config.overrides import SetError, not_an_experiment
from core.contract.names import repeat_suffix
from core.contract.results_location import ResultsLocation, check_run_id
from bench.results.files import existing_summaries

# A local run writes logs, metrics and checkpoints (the dev stack's: 69 MB, 2026-11-27). On a file system with
# less free than this it would fail mid-run, torchrun restarting into the same full disk, the cause in a node log.
MIN_FREE_MB = 128


def free_space_problem(root: Path, min_free_mb: int = MIN_FREE_MB) -> str | None:
    """One line when the file system ``root`` (or its nearest existing parent) is on has too little room."""
    where = nearest_existing(root)
    try:
        free_mb = shutil.disk_usage(where).free / 2**20
    except OSError:
        return None
    if free_mb >= min_free_mb:
        return None
    return (f"--results-root={str(root)!r}: {free_mb:.0f} MiB free on its file system ({where}); a local run writes "
            f"logs, metrics and checkpoints (the dev stack's: about 69 MB) and needs at least {min_free_mb} MiB: "
            "free some space, or choose another --results-root")


DESCRIPTION = """\
Run a stack's experiments, collect their results, and always tear down what the run created.

With --local the experiments run on this machine, scaled down by the stack's local: section
(torchrun with etcd or c10d rendezvous, gloo on CPUs). Without it the whole AWS run happens:
checks first (credentials, quotas, the estimated cost), then pulumi up, the training, the results
copied home and pulumi destroy. Before it creates anything it shows what it creates and what that
costs an hour, and asks Proceed? [y/N]; --yes answers yes (without a terminal, --yes is needed).
Results land in <results-root>/<stack>/<run-id>/<experiment>/ and a table of them is printed at
the end. Several stacks run side by side, each line prefixed with its stack's name (on AWS with --yes).

exit codes:
  0    every experiment succeeded
  1    an experiment, the environment or the teardown failed
  2    bad input, a check before the run refused it, or the question was not answered yes (nothing
       was created)
  130  interrupted (Ctrl-C), 143 terminated (SIGTERM); both after the teardown"""

EXAMPLES = """\
examples:
  eksbench run dev --local                        the dev stack's experiments on this machine
  eksbench run dev --local --dry-run              the plan and the node commands, nothing run
  eksbench run dev --local --experiment cifar10-elastic --run-id try-2
  eksbench run dev --local --set 'experiments[0].nodes=1' --set local.steps=50
  eksbench run dev --max-cost 150 --deadline 120  on AWS, within $150 and two hours (asks first)
  eksbench run dev --yes --max-cost 150           on AWS without the question (scripts, CI)
  eksbench run dev fabric --local                 two stacks side by side"""

# Flags that only one kind of run reads: given to the other, they would be ignored silently.
AWS_ONLY = {"keep": "it keeps the cluster with its GPU groups at zero",
            "yes": "it answers the question asked before resources are created",
            "max_cost": "it caps the AWS run's estimated and spent cost",
            "poll": "it sets how often the cluster's results are checked"}
LOCAL_ONLY = {"dry_run": "for AWS, eksbench plan STACK shows what pulumi up would build and what it costs"}


def positive(unit: str, example: str):
    """An argparse ``type=``: a finite number above 0 of ``unit``, else a message with the rule and an example."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r}: must be a positive number of {unit}, e.g. {example}")
        return value
    return parse


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a stack's experiments: provision, run, collect, tear down "
                                          "(--local: on this machine)",
                              description=DESCRIPTION, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stacks", nargs="+", metavar="stack",
                   help="stack name(s), e.g. dev (reads Pulumi.<stack>.yaml); several run side by side")
    p.add_argument("--local", action="store_true", help="run on this machine, scaled down by the stack's local:")
    p.add_argument("--experiment", metavar="NAME", help="run only this experiment (on AWS: only its Jobs are created)")
    add_set_option(p)
    p.add_argument("--run-id", metavar="ID", help="results folder name (--local; default: UTC timestamp; "
                                                    "on AWS the stack's eksbench:run_id)")
    p.add_argument("--resume", action="store_true",
                   help="reuse a run id whose results already hold a summary.json (otherwise refused)")
    p.add_argument("--progress-every", type=positive("seconds", "--progress-every 10"), default=3.0,
                   metavar="S", help="seconds between progress lines (default: 3)")
    p.add_argument("--deadline", type=positive("minutes", "--deadline 90"), metavar="MIN",
                   help="stop and tear down after this many minutes (AWS default: estimated provisioning x2 "
                        "+ the experiments' timeouts + 10)")
    p.add_argument("--max-cost", type=positive("US dollars", "--max-cost 150"), metavar="USD",
                   help="AWS only: refuse a run estimated above this, and stop + tear down when it is spent")
    p.add_argument("--keep", action="store_true",
                   help="AWS only: do not destroy; scale the GPU node groups to zero and print how to destroy later")
    p.add_argument("-y", "--yes", action="store_true",
                   help="AWS only: create the resources without asking (needed where stdin is not a terminal)")
    p.add_argument("--poll", type=positive("seconds", "--poll 15"), metavar="S",
                   help="AWS only: seconds between result checks (default: 15)")
    add_project_options(p)
    p.add_argument("--dry-run", action="store_true",
                   help="--local only: print the plan and the node commands, run nothing")
    p.set_defaults(func=cmd_run)


def flag_problems(args) -> list[str]:
    """One line per flag that the kind of run asked for (--local or AWS) would ignore."""
    wrong, other = (AWS_ONLY, "drop it or run without --local") if args.local else (
        LOCAL_ONLY, "drop it or add --local")
    kind = "AWS runs" if args.local else "--local runs"
    return [f"--{name.replace('_', '-')}: only for {kind} ({why}); {other}"
            for name, why in wrong.items() if getattr(args, name) not in (None, False)]


def cmd_run(args) -> int:
    problems = flag_problems(args)
    if not problems and (unusable := results_root_problem(args.results_root)):
        problems = [unusable]
    try:
        args.overrides = overrides_of(args, args.experiment)
    except SetError as e:
        problems.append(str(e))
    for problem in problems:
        fail(problem)
    if problems:
        return USAGE_ERROR
    if len(args.stacks) > 1:
        from bench.commands.multi import run_many

        return run_many(args)
    args.stack = args.stacks[0]
    if not args.local:
        from bench.cloud.run import run_cloud

        return run_cloud(args)
    return run_local(args)


def run_local(args) -> int:
    from bench import progress
    from bench.lifecycle import Control, run_lifecycle
    from bench.local import plan as lr
    from bench.local.backend import LocalBackend
    from core.config.fields import ConfigError
    from program.stack_files import load_stack_config
    from workloads.train.common.cpu_choice import read_cpu_facts

    try:
        cfg = load_stack_config(args.stack, Path(args.project_dir), cluster=False,
                                overrides=dataclasses.replace(args.overrides, experiment=None))
    except ConfigError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=sys.stderr)
        return USAGE_ERROR
    run_id = args.run_id or lr.default_run_id(datetime.now(timezone.utc))
    try:
        check_run_id(run_id)
    except ValueError as e:
        return fail(f"--run-id: {e}")
    root = Path(args.results_root).resolve()
    names = [e.name for e in cfg.experiments]
    if args.experiment and args.experiment not in names:
        return fail(not_an_experiment(args.experiment, args.stack, names))
    if not names:
        return fail(f"stack {args.stack} has no experiments (eksbench:experiments)")
    run_dir_for = lambda rid: ResultsLocation(None, cfg.project, args.stack, rid).local_dir(root)  # noqa: E731
    run_dir = run_dir_for(run_id)
    done = existing_summaries(run_dir)
    if done and not args.resume and not args.dry_run:
        return fail(f"run {run_id} of stack {args.stack} already has results ({len(done)} summary.json under "
                    f"{_show(run_dir)}): pick another --run-id, or pass --resume to continue it")
    etcd_bin = shutil.which("etcd")
    gpu = bool(shutil.which("nvidia-smi"))
    cpu = read_cpu_facts()
    cpus = os.cpu_count() or 1
    measured: dict = {}

    def plan_for(run_dir: Path) -> list:
        return [lr.with_rendezvous(e, etcd_available=bool(etcd_bin))
                for e in lr.plan_local(cfg.experiments, cfg.local, run_dir=run_dir, only=args.experiment,
                                       gpu=gpu, cpu=cpu, measured=measured)]
    plan = plan_for(run_dir)
    if not gpu and (timings := cpu_timings(cfg, args.experiment, plan, cpus, cpu)):
        measured.update(timings)
        plan = plan_for(run_dir)
    from bench.local.launch import local_processes, missing_venvs

    missing = missing_venvs(plan)
    if missing:  # refused before anything is written
        return fail("\n  ".join(missing))
    if not args.dry_run and (full := free_space_problem(root)):
        return fail(full)
    if not args.dry_run:  # one run, one folder: reserved before anything is written (bench.local.run_reservation)
        from bench.local.run_reservation import RunTaken, reserve

        try:
            reserved, run_dir = reserve(run_dir_for, run_id, explicit=bool(args.run_id), resume=args.resume)
        except RunTaken as e:
            return fail(str(e))
        except OSError as e:
            return fail(f"--results-root={args.results_root!r}: cannot create {run_dir}: {e.strerror or e}")
        if reserved != run_id:  # a default id another run took: this run's folder is <id>-<k>
            run_id, plan = reserved, plan_for(run_dir)
    mode, why = lr.execution_mode(cfg.execution, cpus, plan)
    say = progress.line  # a reader that goes away stops the output, never the run (bench.progress.reader_gone)
    for text in plan_lines(args.stack, run_id, plan, why, run_dir, gpu=gpu, cpu=cpu):
        say(text)
    if not args.dry_run:  # another local run trains now: both measure less than alone (bench.local.run_reservation)
        from bench.local.run_reservation import note_shared_cpu
        from core.contract.results_location import RunHandle

        if shared := note_shared_cpu(root, run_dir, str(RunHandle(args.stack, run_id))):
            say(f"warning: {shared}", err=True)
    if args.dry_run:
        for e in plan:
            if e.skip:
                continue
            for p in local_processes(e, etcd=None, endpoint="127.0.0.1:PORT",
                                     rdzv_id=f"{args.stack}-{run_id}-{e.name}" + (repeat_suffix(e.repeat) if e.repeat else "")):
                say(" ".join([*(f"{k}={v}" for k, v in p.env.items()), *p.argv]))
        return 0
    backend = LocalBackend(stack=args.stack, run_id=run_id, run_dir=run_dir, plan=plan, mode=mode,
                           timeout_s=cfg.local.timeout_minutes * 60, progress_every=args.progress_every,
                           etcd_bin=etcd_bin, cpus=cpus, results_root=Path(args.results_root), project=cfg.project)
    ctl = Control(deadline_s=args.deadline * 60 if args.deadline else None)
    outcome = run_lifecycle(backend, ctl)
    if outcome.output_note:
        from bench.local.run_reservation import record

        record(run_dir, output=outcome.output_note)
    return outcome.code


def plan_lines(stack: str, run_id: str, plan: list, why: str, run_dir: Path, *, gpu: bool, cpu) -> list[str]:
    """What a local run says before it starts: the stack, run and mode, where its results go, the CPU, and each
    experiment's set-up with its notes."""
    from bench.local import plan as lr

    runs = f" ({len(plan)} runs with repeats)" if any(e.repeat for e in plan) else ""
    lines = [f"stack {stack}, run {run_id}: {len({e.name for e in plan})} experiment(s){runs}, {why}",
             f"results: {_show(run_dir)}", *([] if gpu else [f"device: {cpu.describe()}"])]
    for e in plan:
        lines += [f"  {lr.setup_line(e, gpu=gpu)}", *(f"      {note}" for note in e.notes)]
    return lines


def cpu_timings(cfg, only: str | None, plan: list, cpus: int, cpu) -> dict:
    """bf16 and fp32 step times on this CPU of each model the run trains with PyTorch in mixed precision, by shape,
    with the threads each of its processes will have (bench.local.precision_probe: kept ones, the rest timed now)."""
    from bench import progress
    from bench.local import plan as lr
    from bench.local.precision_probe import measured

    shapes = [s for e in cfg.experiments if only in (None, e.name) if (s := lr.probe_shape(e, cfg.local))]
    if not shapes:
        return {}
    mode, _ = lr.execution_mode(cfg.execution, cpus, plan)
    threads = lr.threads_per_process(cpus, lr.processes_sharing_cores(plan, mode))
    return measured(shapes, facts=cpu, threads=threads, say=progress.line)


def _show(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
