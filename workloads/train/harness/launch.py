"""In-container launcher: run the training command, keep its log, always leave a summary, upload.

``python -m workloads.train.harness.launch --results-dir DIR [--results-uri s3://bucket/prefix/]
[--experiment NAME] [--node-id ID] [--summary auto|always|never] [--nodes N --procs-per-node P]
[--train-config JSON] [--telemetry-interval SECONDS] -- torchrun ...``

What the summary records about the command (its launch shape, the trainer's arguments) comes from
these arguments, built with the command by ``core.contract.launch_command``; the command is never read back.

1. Runs the command in its own session and tees its stdout+stderr to
   ``<results-dir>/logs/<node id>.log`` (and to our stdout, for ``kubectl logs``).
2. Forwards SIGTERM/SIGINT to it (torchrun then stops its workers), and SIGKILLs it if it is
   still alive ``--grace`` seconds later.
3. Always (success, failure or signal) writes ``<results-dir>/summary.json`` if this is the
   summary node, then uploads when ``--results-uri`` is given, summary.json first. Exit code =
   the command's (128 + N when a signal N ended it). Upload failures go to stderr, never change it.
4. Holds SIGTERM/SIGINT from its start to its end: while the command runs they are forwarded;
   before it starts and after it ends they are only recorded, so the summary and the upload
   finish within the pod's grace period. A Job whose success policy is met removes its lingering
   pods with SIGTERM (Kubernetes batch/v1 ``SuccessPolicy``: "the lingering pods are removed"),
   which may reach a pod that is still uploading.
5. When the results directory cannot be written (a missing mount, a folder owned by another
   user), the log and summary go to ``$TMPDIR/eksbench-results/<node id>-<pid>/`` instead (the pods'
   /tmp is a writable emptyDir) and are uploaded from there to the same keys; the summary says
   why in ``results_dir_error``.
6. ``--setup-failed CODE`` records a pod whose set-up (package install, prelude) failed or was
   stopped before the command could start: a failed summary with ``--setup-error`` as its
   error, uploaded like any other, and exit code CODE; the command is not run.
7. Samples the node's GPUs through NVML (else the CPU's RAPL energy) every second in a thread of its own, outside
   the command's processes, into ``telemetry/<node id>.jsonl``; the summary node sums every node's file into the
   summary's ``telemetry`` block (``workloads.train.harness.telemetry``).

Several nodes of one Job share the results directory: the node id defaults to
``node-<JOB_COMPLETION_INDEX>`` (the Indexed Job's pod index) or the hostname, so each node
writes its own log file; only the summary node (``--summary auto``: index 0, or no index at all)
writes summary.json, atomically; and uploads follow the ownership rule of
``workloads.train.harness.upload``. So concurrent nodes never write or upload the same path.

``run`` is the list of these steps; the command's process is ``workloads.train.harness.child``, what the
summary node reads after it ``workloads.train.harness.collect``, and how the run ended, as its summary tells
it, ``workloads.train.harness.outcome``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.catalog.fabric import FABRIC_EXIT_CODE
from core.contract import summary_fields as F
from core.contract.names import ENV_INSTANCE_TYPE, node_name
from core.contract.s3_uri import parse_s3_uri
from workloads.train.harness.child import Child, LineTimes
from workloads.train.harness.collect import collect_metrics, run_flags, stop_cause, what_ran_record
from workloads.train.harness.exit_paths import (
    StopSignals,
    fallback_dir,
    open_log,
    write_summary,
)
from workloads.train.harness.fabric_check import TransportWatch, judge
from workloads.train.harness.outcome import exit_code, provenance, summary_document
from workloads.train.harness.progress import ProgressPublisher
from workloads.train.harness.telemetry import POWERCAP, Sampler
from workloads.train.harness.upload import in_upload_order, upload, upload_plan


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workloads.train.harness.launch", description=__doc__.splitlines()[0])
    p.add_argument("--results-dir", required=True)
    p.add_argument("--results-uri", default=None, help="s3://bucket/prefix/ to upload the results to")
    p.add_argument("--experiment", default=None)
    p.add_argument("--node-id", default=None, help="default: node-<JOB_COMPLETION_INDEX>, else the hostname")
    p.add_argument("--summary", choices=("auto", "always", "never"), default="auto",
                   help="auto: only the node with JOB_COMPLETION_INDEX 0 (or none set) writes summary.json")
    p.add_argument("--grace", type=float, default=60.0, help="seconds between a forwarded signal and SIGKILL")
    p.add_argument("--setup-failed", type=int, default=None, metavar="CODE",
                   help="do not run the command: the pod's set-up failed (or a signal 128+N stopped it) with CODE; "
                        "write and upload a failed summary and exit with CODE")
    p.add_argument("--setup-error", default=None, help="with --setup-failed: what failed, for the summary")
    p.add_argument("--stop-with", default=None, metavar="SUMMARY",
                   help="stop the command once this summary.json is written (by another Job: paddle's trainers), "
                        "and succeed or fail as it says")
    p.add_argument("--nodes", type=int, default=None, help="the most nodes the command runs at, for the summary")
    p.add_argument("--procs-per-node", type=int, default=None, help="its processes per node, for the summary")
    p.add_argument("--train-config", type=train_config, default=None, metavar="JSON",
                   help="the trainer's arguments (core.contract.train_args.TrainArgs as a JSON object), for the summary")
    p.add_argument("--telemetry-interval", type=float, default=1.0, metavar="SECONDS",
                   help="seconds between samples of the node's GPUs (or CPU energy) into telemetry/<node>.jsonl; "
                        "0: no sampler (to measure what it costs)")
    p.add_argument("--powercap", type=Path, default=POWERCAP, help=argparse.SUPPRESS)  # RAPL's sysfs root
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    return p


def node_identity(explicit: str | None, environ: Mapping[str, str], hostname: str) -> str:
    if explicit:
        return explicit
    index = environ.get("JOB_COMPLETION_INDEX")
    return node_name(index) if index not in (None, "") else hostname


def writes_summary(mode: str, environ: Mapping[str, str]) -> bool:
    if mode != "auto":
        return mode == "always"
    return environ.get("JOB_COMPLETION_INDEX", "0") in ("", "0")


def train_config(text: str) -> dict[str, Any]:
    """``--train-config``: the trainer's arguments as a JSON object (core.contract.launch_command.launcher_argv wrote it)."""
    try:
        config = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(config, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object: {type(config).__name__}")
    return config


def progress_total(config: Mapping[str, Any] | None) -> int | None:
    """The steps a run will take, when known before it starts: ``--steps`` for a step-bounded
    run. None for an ``--epochs`` run: its steps per epoch are the dataset size over the global
    batch, which the launcher does not read and an elastic run changes with its world size."""
    if not config or config.get("epochs"):
        return None
    return config.get("steps")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    stop = StopSignals().install()  # first: a SIGTERM from here on never kills us before the upload
    try:
        return run(build_parser().parse_args(sys.argv[1:] if argv is None else argv),
                   dict(os.environ) if environ is None else environ, stop)
    finally:
        stop.restore()


def run(args: argparse.Namespace, environ: Mapping[str, str], stop: StopSignals) -> int:
    """The launcher's steps: read the command and where it uploads, settle this node's folders and sampler, run
    the command (or record the set-up that failed before it), leave the summary, upload; the command's exit code."""
    try:
        command, bucket, prefix = command_and_destination(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    node = settle_node(args, environ)
    if args.setup_failed is not None or stop.name:
        ending = setup_failure(args, stop, node)
    else:
        ending = run_command(command, args, environ, stop, node, bucket, prefix)
    node.sampler.stop()  # a command that never started: no sample past this point either (stopping twice is a no-op)
    returncode = ending.returncode
    if node.summary_node:
        returncode = leave_summary(command, args, environ, node, ending)
    if bucket is not None:
        upload_results(node, bucket, prefix)
    return exit_code(returncode)


def command_and_destination(args: argparse.Namespace) -> tuple[list[str], str | None, str | None]:
    """The command after ``--``, and the bucket and prefix of ``--results-uri`` (None, None without one); a
    ValueError says what is wrong with them."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ValueError("no command given after --")
    bucket = prefix = None
    if args.results_uri:
        bucket, prefix = parse_s3_uri(args.results_uri)
    return command, bucket, prefix


@dataclass
class Node:
    """What the launcher settled before the command: who this node is, where its log and summary go (``local``:
    the folder the log opened in, ``results_error``: why it is not the results directory), its sampler."""

    results: Path
    node_id: str
    dirs: tuple[Path, Path]
    summary_node: bool
    started: float
    config: dict[str, Any] | None
    log: Any
    local: Path | None
    results_error: str | None
    sampler: Sampler


def settle_node(args: argparse.Namespace, environ: Mapping[str, str]) -> Node:
    """This node's identity, its log (in the results directory, else the fallback folder) and its hardware
    sampler, started: the node's GPUs (or CPU energy) from here to the command's end."""
    results = Path(args.results_dir)
    node_id = node_identity(args.node_id, environ, socket.gethostname())
    dirs = (results, fallback_dir(node_id))
    summary_node = writes_summary(args.summary, environ)
    started = time.time()
    config = args.train_config if summary_node else None
    log, local, results_error = open_log(dirs, node_id)
    sampler = (Sampler.open(local, node_id, interval=args.telemetry_interval, powercap=args.powercap)
               if args.telemetry_interval > 0 else
               Sampler(None, node_id, source=None, reason="no telemetry: the launcher ran without its sampler"))
    if results_error:
        print(f"cannot write the results directory ({results_error}); log and summary go to {local}",
              file=sys.stderr)
    return Node(results, node_id, dirs, summary_node, started, config, log, local, results_error, sampler)


@dataclass
class Ending:
    """How the command ended: its return code (the launcher's verdict where it stopped the command itself), the
    signal that stopped it, its log's tail, and the command itself (None where it never started)."""

    returncode: int
    signal_name: str | None
    tail: list[str]
    child: Child | None = None


def setup_failure(args: argparse.Namespace, stop: StopSignals, node: Node) -> Ending:
    """The ending of a pod whose set-up failed (``--setup-failed``) or that a signal stopped before the command
    started: its return code, and one line saying why, in the log too."""
    returncode = args.setup_failed if args.setup_failed is not None else 128 + signal.Signals[stop.name]
    signal_name = (signal.Signals(returncode - 128).name if 128 < returncode < 128 + signal.NSIG
                   else None)
    tail = [args.setup_error or f"stopped by {stop.name} before the command started"]
    if node.log is not None:
        times = LineTimes.open(node.local, node.node_id)
        times.stamp(node.log)
        times.close()
        node.log.write((tail[0] + "\n").encode())
        node.log.close()
    return Ending(returncode, signal_name, tail)


def run_command(command: Sequence[str], args: argparse.Namespace, environ: Mapping[str, str], stop: StopSignals,
                node: Node, bucket: str | None, prefix: str | None) -> Ending:
    """Start the command and see it to its end; one that cannot start (it does not exist) is exit 127, still a
    failed run with a summary."""
    try:
        child = Child(command, node.log, args.grace, TransportWatch(environ),
                      times=LineTimes.open(node.local, node.node_id) if node.log is not None else None)
    except OSError as e:
        tail = [f"cannot start {command[0]!r}: {e}"]
        print(tail[0], file=sys.stderr)
        if node.log is not None:
            node.log.close()
        return Ending(127, None, tail)
    return supervise(child, args, stop, node, bucket, prefix)


def supervise(child: Child, args: argparse.Namespace, stop: StopSignals, node: Node, bucket: str | None,
              prefix: str | None) -> Ending:
    """While the command runs: signals go to it, ``--stop-with`` watches its peers' summary, the summary node
    publishes its progress; once it ends, signals are only recorded and the sampler stops."""
    stop.child = child
    if args.stop_with:
        child.stop_with(args.stop_with, node.started)
    if stop.name and child.signal_name is None:  # arrived while the command was starting
        child.forward(signal.Signals[stop.name])
    publisher = None
    if node.summary_node and bucket is not None:  # live step/total for `bench run` (workloads.train.harness.progress)
        publisher = ProgressPublisher(node.results, bucket, prefix, total=progress_total(node.config)).start()
    try:
        returncode = child.wait()
    finally:
        stop.child = None  # from here on a signal is only recorded
        if publisher is not None:
            publisher.stop()
        node.sampler.stop()
    tail = list(child.tail)
    signal_name = child.signal_name
    if child.watch.tripped:
        returncode = FABRIC_EXIT_CODE
    elif child.peer_status is not None:  # stopped with its peers (--stop-with): their outcome is ours
        returncode = 0 if child.peer_status == F.SUCCEEDED else 1
    return Ending(returncode, signal_name, tail, child)


def summary_metrics(command: Sequence[str], args: argparse.Namespace, environ: Mapping[str, str],
                    node: Node) -> tuple[dict[str, Any], str | None]:
    """The summary's figures (an error in reading them is recorded, never fatal) with the fabric check's, and
    the fabric check's error where ``fabric: strict`` fails the run."""
    config = node.config or {}
    try:
        metrics = collect_metrics(node.results, config.get("target_accuracy"), config.get("precision"),
                                  instance_type=environ.get(ENV_INSTANCE_TYPE), sampler=node.sampler,
                                  node_id=node.node_id, local=node.local if node.local != node.results else None)
    except Exception as e:  # noqa: BLE001 - a summary with the error beats no summary
        metrics = {"metrics_error": f"{type(e).__name__}: {e}"}
    checked, fabric_error = judge(metrics, environ, provenance(environ, command, node.config)[F.FRAMEWORK])
    metrics.update(checked)
    try:
        metrics.update(what_ran_record(environ, metrics, node.results, args.nodes))
    except Exception as e:  # noqa: BLE001 - as above
        metrics["what_ran_error"] = f"{type(e).__name__}: {e}"
    return metrics, fabric_error


def leave_summary(command: Sequence[str], args: argparse.Namespace, environ: Mapping[str, str], node: Node,
                  ending: Ending) -> int:
    """The summary node's summary.json, written atomically where the log went; the return code it records (a
    failed fabric check, a run without a step, the user's signal change the command's)."""
    metrics, fabric_error = summary_metrics(command, args, environ, node)
    returncode = FABRIC_EXIT_CODE if fabric_error else ending.returncode  # fabric: strict (core.catalog.fabric)
    cause, sent = stop_cause(environ) if ending.signal_name else (None, None)
    if flags := run_flags(environ):  # bench run --local: another local run shared the CPU
        metrics[F.FLAGS] = [*(metrics.get(F.FLAGS) or []), *flags]
    child = ending.child
    doc = summary_document(experiment=args.experiment, node_id=node.node_id, command=command,
                           returncode=returncode, signal_name=ending.signal_name,
                           started=node.started, ended=time.time(), metrics=metrics, config=node.config,
                           environ=environ, log_tail=ending.tail, results_uri=args.results_uri,
                           nodes=args.nodes, procs_per_node=args.procs_per_node,
                           cause=cause, sent=sent,
                           trainer=node.config is not None and not args.stop_with,
                           self_stopped=bool(fabric_error) or (child is not None and (
                               child.watch.tripped or child.peer_status is not None)))
    if child is not None and child.peer_status is not None:
        doc[F.STOP_REASON] = f"stopped with its peers: {args.stop_with} says {child.peer_status}"
    if fabric_error:
        doc[F.ERROR] = fabric_error
    if node.results_error:
        doc["results_dir_error"] = node.results_error
    write_summary(doc, node.dirs if node.local in (None, node.results) else node.dirs[1:])
    return doc[F.EXIT_CODE]


def upload_results(node: Node, bucket: str, prefix: str | None) -> None:
    """Upload both folders' files this node owns, summary.json first; a failed upload is only told on stderr."""
    plans = [upload_plan(d, node_id=node.node_id, summary_node=node.summary_node, prefix=prefix) for d in node.dirs]
    plan = in_upload_order(list({key: (path, key) for p in plans for path, key in p}.values()), prefix)
    for err in upload(plan, bucket):
        print(f"upload failed: {err}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
