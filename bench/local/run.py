"""``eksbench run <stack> --local``: the checks, the plan for this machine, then the lifecycle with the local backend.

As ``bench.cloud.run`` is the AWS run, this is the local one. The stack file is read with the run's ``--set``
values; the run id, the experiment asked for and an earlier run's results are checked; the experiments are scaled
to this machine (``bench.local.plan``: its etcd, GPU and CPU, with the CPU's bf16 and fp32 step times measured where
a mixed-precision experiment needs them); a missing framework venv or a full disk refuses the run before anything
is written; the run's folder is reserved (``bench.local.run_reservation``). Then it says what it will run and runs
it: ``bench.lifecycle.run_lifecycle`` with ``bench.local.backend.LocalBackend``. ``--dry-run`` stops after the plan,
printing each node's command. Every refusal is one line and exit code 2 (``bench.errors.fail``).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from bench import progress
from bench.errors import USAGE_ERROR, Refusal, fail
from bench.lifecycle import Control, run_lifecycle
from bench.local import plan as lr
from bench.local.backend import LocalBackend
from bench.local.experiment_run import rendezvous_id
from bench.local.launch import local_processes, missing_venvs
from bench.local.run_reservation import RunTaken, note_shared_cpu, record, reserve
from bench.project import nearest_existing
from bench.results.files import existing_summaries
from bench.terminal import show
from core.config.fields import ConfigError
from core.contract.results_location import ResultsLocation, RunHandle, check_run_id
from program.stack_files import load_stack_config
from workloads.train.common.cpu_choice import CpuFacts, read_cpu_facts

# A local run writes logs, metrics and checkpoints (the dev stack's: 69 MB, 2026-11-27). On a file system with
# less free than this it would fail mid-run, torchrun restarting into the same full disk, the cause in a node log.
MIN_FREE_MB = 128


@dataclass(frozen=True)
class ThisMachine:
    """What a local run's plan depends on here: an etcd binary, a GPU, the CPU's facts and its cores."""
    etcd_bin: str | None
    gpu: bool
    cpu: CpuFacts
    cpus: int


@dataclass(frozen=True)
class PreparedRun:
    """A local run about to start: its id and folder, its experiments planned for this machine, and how they run
    (``mode``: sequential or parallel; ``why``: the reason, said in the plan's first line)."""
    run_id: str
    run_dir: Path
    plan: list
    machine: ThisMachine
    mode: str
    why: str


def run_local(args) -> int:
    """Read the stack, prepare the run (checks, plan, folder), say its plan, then run it; ``--dry-run``: the plan
    and each node's command only. The exit code of ``eksbench run``."""
    try:
        # only --experiment's experiment is kept, then judged (core.config.overrides.select), as the plan, the AWS
        # run's preflight and pulumi up's program judge it: another experiment's problem is not this run's
        cfg = load_stack_config(args.stack, Path(args.project_dir), cluster=False, overrides=args.overrides)
    except ConfigError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=sys.stderr)
        return USAGE_ERROR
    try:
        run = prepare(args, cfg)
    except Refusal as e:
        return fail(str(e))
    say = progress.line  # a reader that goes away stops the output, never the run (bench.progress.reader_gone)
    for text in plan_lines(args.stack, run.run_id, run.plan, run.why, run.run_dir, gpu=run.machine.gpu,
                           cpu=run.machine.cpu):
        say(text)
    if args.dry_run:
        for text in node_command_lines(args.stack, run.run_id, run.plan):
            say(text)
        return 0
    # another local run trains now: both measure less than alone (bench.local.run_reservation)
    if shared := note_shared_cpu(Path(args.results_root).resolve(), run.run_dir,
                                 str(RunHandle(args.stack, run.run_id))):
        say(f"warning: {shared}", err=True)
    return run_on_this_machine(args, cfg, run)


def prepare(args, cfg) -> PreparedRun:
    """The run's id, experiment and folder checked, its experiments planned for this machine, and (unless a dry
    run) its folder reserved; ``Refusal`` at the first check that fails, before anything is written."""
    run_id = checked_run_id(args.run_id)
    check_experiments(args.stack, cfg)
    root = Path(args.results_root).resolve()
    run_dir_for = lambda rid: ResultsLocation(None, cfg.project, args.stack, rid).local_dir(root)  # noqa: E731
    run_dir = run_dir_for(run_id)
    if not args.resume and not args.dry_run:
        check_no_results(args.stack, run_id, run_dir)
    machine = this_machine()
    plan = local_plan(cfg, run_dir, machine)
    measured = {} if machine.gpu else cpu_timings(cfg, plan, machine.cpus, machine.cpu)
    if measured:
        plan = local_plan(cfg, run_dir, machine, measured)
    check_can_run(plan, root, dry_run=args.dry_run)
    if not args.dry_run:  # one run, one folder: reserved before anything is written (bench.local.run_reservation)
        reserved, run_dir = reserve_folder(run_dir_for, run_id, explicit=bool(args.run_id), resume=args.resume,
                                           results_root=args.results_root)
        if reserved != run_id:  # a default id another run took: this run's folder is <id>-<k>
            run_id, plan = reserved, local_plan(cfg, run_dir, machine, measured)
    mode, why = lr.execution_mode(cfg.execution, machine.cpus, plan)
    return PreparedRun(run_id=run_id, run_dir=run_dir, plan=plan, machine=machine, mode=mode, why=why)


def checked_run_id(run_id: str | None) -> str:
    """``--run-id``, or the default (a UTC timestamp), if it can name a folder of the results layout."""
    run_id = run_id or lr.default_run_id(datetime.now(timezone.utc))
    try:
        check_run_id(run_id)
    except ValueError as e:
        raise Refusal(f"--run-id: {e}") from None
    return run_id


def check_experiments(stack: str, cfg: Any) -> None:
    """The stack has experiments (``--experiment`` named one of them: ``load_stack_config`` kept it alone)."""
    if not cfg.experiments:
        raise Refusal(f"stack {stack} has no experiments (eksbench:experiments)")


def check_no_results(stack: str, run_id: str, run_dir: Path) -> None:
    """No summary.json under the run's folder yet (``--resume`` continues a run that has some)."""
    if done := existing_summaries(run_dir):
        raise Refusal(f"run {run_id} of stack {stack} already has results ({len(done)} summary.json under "
                      f"{show(run_dir)}): pick another --run-id, or pass --resume to continue it")


def this_machine() -> ThisMachine:
    """This machine as a local run's plan sees it: etcd and nvidia-smi on PATH, /proc/cpuinfo, the core count."""
    return ThisMachine(etcd_bin=shutil.which("etcd"), gpu=bool(shutil.which("nvidia-smi")), cpu=read_cpu_facts(),
                       cpus=os.cpu_count() or 1)


def local_plan(cfg: Any, run_dir: Path, machine: ThisMachine, measured: dict | None = None) -> list:
    """The config's experiments scaled to this machine under ``run_dir``, each with the rendezvous it can have
    here; ``measured``: this CPU's step times (``cpu_timings``)."""
    return [lr.with_rendezvous(e, etcd_available=bool(machine.etcd_bin))
            for e in lr.plan_local(cfg.experiments, cfg.local, run_dir=run_dir, gpu=machine.gpu,
                                   cpu=machine.cpu, measured=measured or {})]


def cpu_timings(cfg, plan: list, cpus: int, cpu) -> dict:
    """bf16 and fp32 step times on this CPU of each model the run trains with PyTorch in mixed precision, by shape,
    with the threads each of its processes will have (bench.local.precision_probe: kept ones, the rest timed now)."""
    from bench.local.precision_probe import measured

    shapes = [s for e in cfg.experiments if (s := lr.probe_shape(e, cfg.local))]
    if not shapes:
        return {}
    mode, _ = lr.execution_mode(cfg.execution, cpus, plan)
    threads = lr.threads_per_process(cpus, lr.processes_sharing_cores(plan, mode))
    return measured(shapes, facts=cpu, threads=threads, say=progress.line)


def check_can_run(plan: list, root: Path, *, dry_run: bool) -> None:
    """Every framework venv the plan needs is there, and (unless a dry run) the results' disk has room."""
    if missing := missing_venvs(plan):
        raise Refusal("\n  ".join(missing))
    if not dry_run and (full := free_space_problem(root)):
        raise Refusal(full)


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


def reserve_folder(run_dir_for: Callable[[str], Path], run_id: str, *, explicit: bool, resume: bool,
                   results_root: str) -> tuple[str, Path]:
    """The run's id and folder, reserved (``bench.local.run_reservation.reserve``); a taken or unwritable one
    refused, naming ``--results-root`` as given."""
    try:
        return reserve(run_dir_for, run_id, explicit=explicit, resume=resume)
    except RunTaken as e:
        raise Refusal(str(e)) from None
    except OSError as e:
        raise Refusal(f"--results-root={results_root!r}: cannot create {run_dir_for(run_id)}: "
                      f"{e.strerror or e}") from None


def plan_lines(stack: str, run_id: str, plan: list, why: str, run_dir: Path, *, gpu: bool, cpu) -> list[str]:
    """What a local run says before it starts: the stack, run and mode, where its results go, the CPU, and each
    experiment's set-up with its notes."""
    runs = f" ({len(plan)} runs with repeats)" if any(e.repeat for e in plan) else ""
    lines = [f"stack {stack}, run {run_id}: {len({e.name for e in plan})} experiment(s){runs}, {why}",
             f"results: {show(run_dir)}", *([] if gpu else [f"device: {cpu.describe()}"])]
    for e in plan:
        lines += [f"  {lr.setup_line(e, gpu=gpu)}", *(f"      {note}" for note in e.notes)]
    return lines


def node_command_lines(stack: str, run_id: str, plan: list) -> Iterator[str]:
    """What ``--dry-run`` prints after the plan: each node's env and command, its rendezvous on a stand-in port."""
    for e in plan:
        if e.skip:
            continue
        for p in local_processes(e, etcd=None, endpoint="127.0.0.1:PORT", rdzv_id=rendezvous_id(stack, run_id, e)):
            yield " ".join([*(f"{k}={v}" for k, v in p.env.items()), *p.argv])


def run_on_this_machine(args, cfg: Any, run: PreparedRun) -> int:
    """The lifecycle with the local backend; a reader of the output that went away is kept in the run's record."""
    backend = LocalBackend(stack=args.stack, run_id=run.run_id, run_dir=run.run_dir, plan=run.plan, mode=run.mode,
                           timeout_s=cfg.local.timeout_minutes * 60, progress_every=args.progress_every,
                           etcd_bin=run.machine.etcd_bin, cpus=run.machine.cpus, results_root=Path(args.results_root),
                           project=cfg.project)
    ctl = Control(deadline_s=args.deadline * 60 if args.deadline else None)
    outcome = run_lifecycle(backend, ctl)
    if outcome.output_note:
        record(run.run_dir, output=outcome.output_note)
    return outcome.code
