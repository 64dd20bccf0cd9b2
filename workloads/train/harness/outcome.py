"""How a run ended, told in its summary: the status and stop reason, the root cause in the log's tail, where
and what ran, and the summary document itself. Pure functions over what the launcher has read."""

from __future__ import annotations

import re
import time
from typing import Any, Mapping, Sequence

from core.catalog.workload_facts import WORKLOADS
from core.contract import summary_fields as F
from core.contract.names import ENV_FRAMEWORK, ENV_GIT_COMMIT, ENV_IMAGE, ENV_INSTANCE_TYPE


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


def exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


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


def provenance(environ: Mapping[str, str], command: Sequence[str], config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Where and what ran: instance type (EKSBENCH_INSTANCE_TYPE, set by the Job), framework, model."""
    framework = environ.get(ENV_FRAMEWORK) or ("pytorch" if config is not None else None)
    workload = (config or {}).get("workload")
    return {F.INSTANCE_TYPE: environ.get(ENV_INSTANCE_TYPE), F.FRAMEWORK: framework,
            "model": WORKLOADS[workload].model if workload in WORKLOADS else None}


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
