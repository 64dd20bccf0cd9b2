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
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.catalog.fabric import FABRIC_EXIT_CODE
from core.catalog.workload_facts import WORKLOADS
from core.contract import summary_fields as F
from core.contract.names import (
    ALLREDUCE_LINES_FILE,
    ENV_FRAMEWORK,
    ENV_GIT_COMMIT,
    ENV_IMAGE,
    ENV_INSTANCE_TYPE,
    ENV_LAUNCHED_AT,
    LOGS_DIR,
    node_log_times,
    node_name,
)
from core.contract.s3_uri import parse_s3_uri
from workloads.train.common.metrics import metrics_dir, read_jsonl, read_rank_metrics
from workloads.train.harness import summary as figures
from workloads.train.harness.exit_paths import (
    StopSignals,
    fallback_dir,
    open_log,
    write_summary,
)
from workloads.train.harness.fabric_check import TransportWatch, busbw_summary, judge
from workloads.train.harness.progress import ProgressPublisher
from workloads.train.harness.telemetry import POWERCAP, Sampler
from workloads.train.harness.telemetry_summary import steady_window, summarise_files
from workloads.train.harness.upload import in_upload_order, upload, upload_plan
from workloads.train.harness.what_ran import read_efa_installer, what_ran


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


ERROR_LINE = re.compile(r"^(?:\[rank\d+\]:\s*)?\s*((?:[\w.]+\.)?\w*(?:Error|Exception)\b.*)$")


# Errors of the machine, not the code: where one appears, it is the cause, and what follows it (a rank that
# lost its peer: "DistNetworkError: Broken pipe", torchrun's restarts) is only its consequence.
MACHINE_ERRORS = ("No space left on device", "Disk quota exceeded", "Read-only file system", "Cannot allocate memory")


def root_cause(lines: Sequence[str]) -> str | None:
    """The first exception line that names a machine error (a full disk), else the last exception line in the
    log tail (``FileNotFoundError: ...``), rank prefix removed."""
    for line in lines:
        m = ERROR_LINE.match(line.strip())
        if m and any(e in m.group(1) for e in MACHINE_ERRORS):
            return m.group(1)
    for line in reversed(lines):
        m = ERROR_LINE.match(line.strip())
        if m and not m.group(1).startswith(("ChildFailedError", "torch.distributed.elastic")):
            return m.group(1)
    return None


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The command's environment: ours, plus a torchrun setting elastic restarts need.

    torch >= 2.4 shares one TCPStore, hosted by the first round's rank-0 agent, across all
    rendezvous rounds (dynamic_rendezvous.py, ``_shared_tcp_store_server``). After a restart
    the workers then find the previous attempt's gloo keys in it (we saw ranks of different
    restart counts hang in connectFullMesh), and if that agent's node is gone the others keep
    pointing at a dead store. ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` gives every round a fresh
    store on the new rank 0 (the pre-2.4 behaviour). An explicit value in the environment wins.
    """
    env = dict(environ)
    env.setdefault(ENV_LAUNCHED_AT, f"{time.time():.3f}")  # the trainer's start-up record counts from here
    env.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


STOP_CAUSES = (F.INTERRUPTED, F.DEADLINE, F.TIMEOUT)


def stop_cause(environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(what ``F.STOP_REASON_ENV``'s file says stopped us: one of STOP_CAUSES, the signal the user sent where it
    names one); (None, None) when nothing (usable) does."""
    path = environ.get(F.STOP_REASON_ENV)
    if not path:
        return None, None
    try:
        with open(path, "rb") as f:
            text = f.read(64).decode("ascii", "replace")
    except OSError:
        return None, None
    return F.parse_stop(text, STOP_CAUSES)


def run_flags(environ: Mapping[str, str]) -> list[str]:
    """The flags ``F.RUN_FLAGS_ENV``'s file gives this run (another local run shared the CPU)."""
    return read_flags(environ.get(F.RUN_FLAGS_ENV))


def read_flags(path: str | None, most: int = 10, width: int = 300) -> list[str]:
    """A flags file's first ``most`` different lines, each cut to ``width`` characters; none when there is none."""
    if not path:
        return []
    try:
        with open(path, "rb") as f:
            lines = f.read(most * (width + 1)).decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return list(dict.fromkeys(line.strip()[:width] for line in lines if line.strip()))[:most]


def run_status(code: int, signal_name: str | None, divergence: Mapping[str, Any] | None,
               cause: str | None, sent: str | None = None) -> tuple[str, str | None]:
    """(status, stop reason): diverged before anything else (the numbers are wrong whatever the exit), then
    succeeded on exit 0, then a signal's cause (interrupted unless told otherwise; ``sent``: the signal the user
    sent to ``bench run``, told in its words: "Ctrl-C"), else failed."""
    if divergence:
        return F.DIVERGED, divergence.get("reason") or "non-finite loss"
    if code == 0:
        return F.SUCCEEDED, None
    if signal_name and cause == F.INTERRUPTED and sent in F.USER_SIGNALS:
        return F.INTERRUPTED, F.USER_SIGNALS[sent]
    if signal_name:
        status = cause or F.INTERRUPTED
        told = {F.DEADLINE: "the run's deadline", F.TIMEOUT: "the experiment's timeout",
                F.INTERRUPTED: "an interrupt (Ctrl-C, or the run stopping)"}
        return status, f"{signal_name}: " + (told[cause] if cause else
                                              "from outside (a Job's deadline, a node drain, a deletion, Ctrl-C)")
    return F.FAILED, f"exit code {code}"


NO_STEP = ("exit code 0, but no training step was recorded (no metrics line in the results folder's metrics/): a "
           "run without a measured step is no result")


def recorded_nothing(metrics: Mapping[str, Any]) -> bool:
    """The metrics were read and hold no step of training and no all-reduce size (the allreduce workload's lines)."""
    coverage = metrics.get(F.COVERAGE)
    return isinstance(coverage, Mapping) and not coverage.get("steps") and not metrics.get(F.BUSBW)


# torch elastic's etcd rendezvous (etcd_rendezvous_backend.py) raises RendezvousConnectionError
# ("The connection to etcd has failed. See inner exception for details.") when etcd does not answer.
RDZV_LOST = re.compile(r"RendezvousConnectionError|connection to etcd has failed")


def rendezvous_lost(log_tail: Sequence[str], command: Sequence[str]) -> str | None:
    """The stop reason of a run whose rendezvous lost etcd, else None."""
    if not any(RDZV_LOST.search(line) for line in log_tail):
        return None
    endpoint = next((a.split("=", 1)[1] for a in command if a.startswith("--rdzv-endpoint=")), None)
    if endpoint is None and "--rdzv-endpoint" in command[:-1]:
        endpoint = command[list(command).index("--rdzv-endpoint") + 1]
    return (f"rendezvous lost: etcd at {endpoint or 'the rendezvous endpoint'} did not answer "
            "(RendezvousConnectionError); the Job restarts the pod up to its backoffLimit, each restart "
            "waits on the same etcd, then the Job fails; use rendezvous c10d for long runs")


def summary_document(*, experiment: str | None, node_id: str, command: Sequence[str], returncode: int,
                     signal_name: str | None, started: float, ended: float, metrics: Mapping[str, Any],
                     config: Mapping[str, Any] | None, environ: Mapping[str, str], log_tail: Sequence[str],
                     results_uri: str | None, nodes: int | None = None,
                     procs_per_node: int | None = None, cause: str | None = None, sent: str | None = None,
                     self_stopped: bool = False, trainer: bool = False) -> dict[str, Any]:
    """The summary; ``self_stopped``: the launcher itself signalled the command (``fabric: strict``), so its
    signal is a failure of the run, not a stop from outside. ``trainer``: the command trains and records its own
    steps (not an evaluation, a staging step or a pserver whose outcome is its trainers'), so exiting 0 without
    one recorded step is a failure (``NO_STEP``). ``sent``: the signal the user sent to ``bench run``, which
    stopped us with a SIGTERM: the summary records the user's signal and its exit code (Ctrl-C: SIGINT, 130)."""
    code = exit_code(returncode)
    divergence = metrics.get(F.DIVERGENCE)
    status, why = run_status(code, None if self_stopped else signal_name, divergence, cause, sent)
    if status == F.INTERRUPTED and sent in F.USER_SIGNALS and why == F.USER_SIGNALS[sent]:  # the user's signal
        signal_name, code = sent, F.signal_exit_code(sent)
    if status == F.FAILED:
        why = rendezvous_lost(log_tail, command) or why
    if status == F.DIVERGED and code == 0:
        code = F.DIVERGED_EXIT_CODE  # the trainer exits 0 (no torchrun restart); the run did not succeed
    elif status == F.SUCCEEDED and trainer and recorded_nothing(metrics):
        status, why, code = F.FAILED, NO_STEP, F.NO_STEPS_EXIT_CODE
    doc = {F.EXPERIMENT: experiment, F.STATUS: status, F.STOP_REASON: why, F.EXIT_CODE: code,
           "signal": signal_name, "node_id": node_id,
           F.STARTED_AT: _iso(started), "ended_at": _iso(ended), F.WALL_TIME_S: round(ended - started, 3),
           F.IMAGE: environ.get(ENV_IMAGE), F.GIT_COMMIT: environ.get(ENV_GIT_COMMIT),
           F.RESULTS_URI: results_uri, F.COMMAND: list(command), F.CONFIG: dict(config) if config else None,
           F.LAUNCH: {F.LAUNCH_NODES: nodes, F.LAUNCH_PROCS_PER_NODE: procs_per_node},
           **provenance(environ, command, config)}
    doc.update(metrics)
    if code != 0:
        doc[F.ERROR] = why if code in (F.DIVERGED_EXIT_CODE, F.NO_STEPS_EXIT_CODE) else root_cause(log_tail)
        doc["log_tail"] = list(log_tail)
    return doc


# NCCL's INIT lines (NCCL_DEBUG=INFO) name the network plugin it picked: "NCCL INFO NET/OFI Using
# aws-ofi-nccl 1.x" (EFA through libfabric), "NCCL INFO NET/Socket : Using [0]eth0:..." (TCP), "NET/IB".
NCCL_NET = re.compile(r"NCCL INFO (NET/(?:OFI|Socket|IB))\b")
NCCL_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")


def nccl_transport(log_texts: Sequence[str]) -> dict[str, Any]:
    """The NCCL network transport the run used, parsed from the node logs' NCCL INIT lines.

    ``NET/OFI`` is EFA (aws-ofi-nccl); ``NET/Socket`` is TCP. Several transports (nodes that
    disagree) are all listed. None with a note when no NCCL line is there (gloo on CPU, or
    NCCL_DEBUG unset).
    """
    found: list[str] = []
    network: list[str] = []
    for text in log_texts:
        for m in NCCL_NET.finditer(text):
            if m.group(1) not in found:
                found.append(m.group(1))
        for m in NCCL_NETWORK.finditer(text):
            if m.group(1) not in network:
                network.append(m.group(1))
    if not found:
        return {"nccl_transport": None,
                "nccl_transport_note": "no NCCL INIT line in the node logs (gloo on CPU, or NCCL_DEBUG is not INFO)"}
    return {"nccl_transport": found[0] if len(found) == 1 else found, "nccl_network": network or None}


def read_logs(results_dir: Path, max_bytes: int = 2_000_000) -> list[str]:
    """The head of every node log (NCCL prints its INIT lines at the start)."""
    out = []
    for path in sorted((results_dir / LOGS_DIR).glob("*.log")):
        try:
            with open(path, "rb") as f:
                out.append(f.read(max_bytes).decode("utf-8", "replace"))
        except OSError:
            continue
    return out


def provenance(environ: Mapping[str, str], command: Sequence[str], config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Where and what ran: instance type (EKSBENCH_INSTANCE_TYPE, set by the Job), framework, model."""
    framework = environ.get(ENV_FRAMEWORK) or ("pytorch" if config is not None else None)
    workload = (config or {}).get("workload")
    return {F.INSTANCE_TYPE: environ.get(ENV_INSTANCE_TYPE), F.FRAMEWORK: framework,
            "model": WORKLOADS[workload].model if workload in WORKLOADS else None}


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def collect_metrics(results_dir: Path, target: float | None, precision: str | None = None, *,
                    instance_type: str | None = None, sampler: Sampler | None = None,
                    node_id: str = "", local: Path | None = None) -> dict[str, Any]:
    """The run's figures from the results folder; ``sampler``: this node's (stopped), whose files and those of the
    other nodes give the ``telemetry`` block (``local``: this node's fallback folder, where its file may be)."""
    mdir = metrics_dir(results_dir)
    by_rank = read_rank_metrics(results_dir)
    out = figures.metrics_summary(by_rank, read_jsonl(mdir / "eval.jsonl"),
                                  read_jsonl(mdir / "events.jsonl"), target, precision)
    if sampler is not None:
        out[F.TELEMETRY] = summarise_files([results_dir] + ([local] if local else []), own=node_id,
                                           source=sampler.kind, reason=sampler.reason,
                                           window=steady_window(by_rank))
    out.update(nccl_transport(read_logs(results_dir)))
    busbw = read_jsonl(mdir / ALLREDUCE_LINES_FILE)  # the allreduce workload's lines, where it ran
    if busbw:
        out[F.BUSBW] = busbw_summary(busbw, instance_type=instance_type, nodes=out.get(F.NODES))
    return out


def what_ran_record(environ: Mapping[str, str], metrics: Mapping[str, Any], results_dir: Path,
                    nodes: int | None) -> dict[str, Any]:
    """The summary's ``what_ran`` and ``what_ran_unknown`` (workloads.train.harness.what_ran says where each comes from);
    ``nodes``: as the ranks' lines count them, else as launched (the launcher's ``--nodes``)."""
    nodes = metrics.get(F.NODES) or nodes
    ran, why = what_ran(environ=environ, device=metrics.get(F.DEVICE), nodes=nodes, log_texts=read_logs(results_dir),
                        efa_installed=read_efa_installer())
    return {F.WHAT_RAN: ran, F.WHAT_RAN_UNKNOWN: why}


def progress_total(config: Mapping[str, Any] | None) -> int | None:
    """The steps a run will take, when known before it starts: ``--steps`` for a step-bounded
    run. None for an ``--epochs`` run: its steps per epoch are the dataset size over the global
    batch, which the launcher does not read and an elastic run changes with its world size."""
    if not config or config.get("epochs"):
        return None
    return config.get("steps")


class LineTimes:
    """``logs/<node id>.log.times``: for each line the log gets, ``<its byte offset in the log> <epoch seconds>``.

    The log stays the command's output byte for byte (root causes, NCCL's lines and every reader of it parse
    it as it is); ``bench logs --timestamps`` joins the two by offset, so a line the log has and this file
    lacks (its write failed, a launcher that died between the two) shows without a time, never with another
    line's. Writing it never fails the run: the first OSError ends it."""

    def __init__(self, file: Any):
        self.file = file

    @classmethod
    def open(cls, directory: Path | None, node_id: str) -> "LineTimes":
        try:
            return cls(open(Path(directory) / node_log_times(node_id), "ab", buffering=0) if directory else None)
        except OSError:
            return cls(None)

    def stamp(self, log: Any) -> None:
        """The time of the line about to be written to ``log`` (at its end: the log is opened to append)."""
        if self.file is None:
            return
        try:
            self.file.write(f"{log.tell()} {time.time():.3f}\n".encode())
        except OSError:
            self.close()

    def close(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
            self.file = None


class Child:
    """The command, its tee thread and the signal forwarding."""

    def __init__(self, command: Sequence[str], log: Any, grace: float, watch: TransportWatch | None = None,
                 times: Any = None):
        self.log = log
        self.times = times  # LineTimes: when each line reached the log (bench logs --timestamps)
        self.watch = watch
        self.tail: collections.deque[str] = collections.deque(maxlen=80)
        self.signal_name: str | None = None
        self.peer_status: str | None = None  # what --stop-with's summary said, once it stopped the command
        self.grace = grace
        self.proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=child_env(os.environ))
        self.tee = threading.Thread(target=self._copy, daemon=True)
        self.tee.start()

    def _copy(self) -> None:
        out = getattr(sys.stdout, "buffer", None)
        for line in iter(self.proc.stdout.readline, b""):
            if self.log is not None:
                try:
                    if self.times is not None:
                        self.times.stamp(self.log)
                    self.log.write(line)
                except OSError:  # the file system went away: keep the tail and stdout
                    self.log = None
            text = line.decode("utf-8", "replace").rstrip("\n")
            self.tail.append(text)
            if self.watch is not None and self.watch.sees(text):  # fabric: strict, NCCL on sockets: stop now
                self.forward(signal.SIGTERM)
            if out is not None:
                try:
                    out.write(line)
                    out.flush()
                except (OSError, ValueError):
                    out = None

    def stop_with(self, path: str, since: float, every: float = 1.0) -> None:
        """Watch for ``path`` (a summary written after ``since``) in a thread; once it is there, record its status
        in ``peer_status`` and stop the command: paddle's pservers serve until their trainers are done, and
        trainers that failed never tell them so."""
        def watch() -> None:
            while self.proc.poll() is None:
                try:
                    if os.stat(path).st_mtime >= since - 1:
                        with open(path, "rb") as f:
                            status = json.loads(f.read(1_000_000)).get(F.STATUS)
                        self.peer_status = status if status in F.STATUSES else F.FAILED
                        print(f"launcher: {path} says {self.peer_status}: stopping the command", flush=True)
                        self.forward(signal.SIGTERM)
                        return
                except (OSError, ValueError, AttributeError):
                    pass  # not there yet, or half-written: look again
                time.sleep(every)
        threading.Thread(target=watch, daemon=True).start()

    def forward(self, signum: int, _frame: Any = None) -> None:
        self.signal_name = signal.Signals(signum).name
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
            timer = threading.Timer(self.grace, self._kill)
            timer.daemon = True
            timer.start()

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self) -> int:
        rc = self.proc.wait()
        # Nothing the command started outlives it: what is left in its session's process group (Paddle's gloo
        # set-up forks a multiprocessing Manager that stayed behind its stopped pserver) is killed now. The group
        # id is the command's pid (start_new_session); an empty group is ESRCH.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.tee.join(timeout=10)
        if self.log is not None:
            self.log.close()
        if self.times is not None:
            self.times.close()
        return rc


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    stop = StopSignals().install()  # first: a SIGTERM from here on never kills us before the upload
    try:
        return run(build_parser().parse_args(sys.argv[1:] if argv is None else argv),
                   dict(os.environ) if environ is None else environ, stop)
    finally:
        stop.restore()


def run(args: argparse.Namespace, environ: Mapping[str, str], stop: StopSignals) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("error: no command given after --", file=sys.stderr)
        return 2
    bucket = prefix = None
    if args.results_uri:
        try:
            bucket, prefix = parse_s3_uri(args.results_uri)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    results = Path(args.results_dir)
    node_id = node_identity(args.node_id, environ, socket.gethostname())
    dirs = (results, fallback_dir(node_id))
    summary_node = writes_summary(args.summary, environ)
    started = time.time()
    config = args.train_config if summary_node else None
    publisher = child = None
    signal_name = None
    log, local, results_error = open_log(dirs, node_id)
    sampler = (Sampler.open(local, node_id, interval=args.telemetry_interval, powercap=args.powercap)
               if args.telemetry_interval > 0 else  # the node's GPUs (or CPU energy) from here to the command's end
               Sampler(None, node_id, source=None, reason="no telemetry: the launcher ran without its sampler"))
    if results_error:
        print(f"cannot write the results directory ({results_error}); log and summary go to {local}",
              file=sys.stderr)
    if args.setup_failed is not None or stop.name:
        returncode = args.setup_failed if args.setup_failed is not None else 128 + signal.Signals[stop.name]
        signal_name = (signal.Signals(returncode - 128).name if 128 < returncode < 128 + signal.NSIG
                       else None)
        tail = [args.setup_error or f"stopped by {stop.name} before the command started"]
        if log is not None:
            times = LineTimes.open(local, node_id)
            times.stamp(log)
            times.close()
            log.write((tail[0] + "\n").encode())
            log.close()
    else:
        try:
            child = Child(command, log, args.grace, TransportWatch(environ),
                          times=LineTimes.open(local, node_id) if log is not None else None)
        except OSError as e:  # the command does not exist: still a failed run with a summary
            returncode, tail = 127, [f"cannot start {command[0]!r}: {e}"]
            print(tail[0], file=sys.stderr)
            if log is not None:
                log.close()
    if child is not None:
        stop.child = child
        if args.stop_with:
            child.stop_with(args.stop_with, started)
        if stop.name and child.signal_name is None:  # arrived while the command was starting
            child.forward(signal.Signals[stop.name])
        if summary_node and bucket is not None:  # live step/total for `bench run` (workloads.train.harness.progress)
            publisher = ProgressPublisher(results, bucket, prefix, total=progress_total(config)).start()
        try:
            returncode = child.wait()
        finally:
            stop.child = None  # from here on a signal is only recorded
            if publisher is not None:
                publisher.stop()
            sampler.stop()
        tail = list(child.tail)
        signal_name = child.signal_name
        if child.watch.tripped:
            returncode = FABRIC_EXIT_CODE
        elif child.peer_status is not None:  # stopped with its peers (--stop-with): their outcome is ours
            returncode = 0 if child.peer_status == F.SUCCEEDED else 1
    sampler.stop()  # a command that never started: no sample past this point either (stopping twice is a no-op)
    if summary_node:
        try:
            metrics = collect_metrics(results, (config or {}).get("target_accuracy"), (config or {}).get("precision"),
                                      instance_type=environ.get(ENV_INSTANCE_TYPE), sampler=sampler,
                                      node_id=node_id, local=local if local != results else None)
        except Exception as e:  # noqa: BLE001 - a summary with the error beats no summary
            metrics = {"metrics_error": f"{type(e).__name__}: {e}"}
        checked, fabric_error = judge(metrics, environ, provenance(environ, command, config)[F.FRAMEWORK])
        metrics.update(checked)
        if fabric_error:  # fabric: strict (core.catalog.fabric): the run fails whatever its command returned
            returncode = FABRIC_EXIT_CODE
        try:
            metrics.update(what_ran_record(environ, metrics, results, args.nodes))
        except Exception as e:  # noqa: BLE001 - as above
            metrics["what_ran_error"] = f"{type(e).__name__}: {e}"
        cause, sent = stop_cause(environ) if signal_name else (None, None)
        if flags := run_flags(environ):  # bench run --local: another local run shared the CPU
            metrics[F.FLAGS] = [*(metrics.get(F.FLAGS) or []), *flags]
        doc = summary_document(experiment=args.experiment, node_id=node_id, command=command,
                               returncode=returncode, signal_name=signal_name,
                               started=started, ended=time.time(), metrics=metrics, config=config,
                               environ=environ, log_tail=tail, results_uri=args.results_uri,
                               nodes=args.nodes, procs_per_node=args.procs_per_node,
                               cause=cause, sent=sent,
                               trainer=config is not None and not args.stop_with,
                               self_stopped=bool(fabric_error) or (child is not None and (
                                   child.watch.tripped or child.peer_status is not None)))
        if child is not None and child.peer_status is not None:
            doc[F.STOP_REASON] = f"stopped with its peers: {args.stop_with} says {child.peer_status}"
        returncode = doc[F.EXIT_CODE]
        if fabric_error:
            doc[F.ERROR] = fabric_error
        if results_error:
            doc["results_dir_error"] = results_error
        write_summary(doc, dirs if local in (None, results) else dirs[1:])
    if bucket is not None:
        plans = [upload_plan(d, node_id=node_id, summary_node=summary_node, prefix=prefix) for d in dirs]
        plan = in_upload_order(list({key: (path, key) for p in plans for path, key in p}.values()), prefix)
        for err in upload(plan, bucket):
            print(f"upload failed: {err}", file=sys.stderr)
    return exit_code(returncode)


if __name__ == "__main__":
    raise SystemExit(main())
