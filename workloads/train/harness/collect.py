"""What the summary node reads after the command ends: the run's figures from the results folder (metrics,
telemetry, the NCCL transport of the node logs, the all-reduce sizes, what ran), and the files a local run
leaves beside it (what stopped it, the flags of a shared CPU)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.contract import summary_fields as F
from core.contract.names import ALLREDUCE_LINES_FILE, LOGS_DIR
from workloads.train.common.metrics import metrics_dir, read_jsonl, read_rank_metrics
from workloads.train.harness import summary as figures
from workloads.train.harness.fabric_check import busbw_summary
from workloads.train.harness.telemetry import Sampler
from workloads.train.harness.telemetry_summary import is_number, steady_window, summarise_files
from workloads.train.harness.what_ran import read_efa_installer, what_ran


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


def collect_metrics(results_dir: Path, target: float | None, precision: str | None = None, *,
                    instance_type: str | None = None, sampler: Sampler | None = None,
                    node_id: str = "", local: Path | None = None) -> dict[str, Any]:
    """The run's figures from the results folder; ``sampler``: this node's (stopped), whose files and those of the
    other nodes give the ``telemetry`` block (``local``: this node's fallback folder, where its file may be)."""
    mdir = metrics_dir(results_dir)
    by_rank, evals = read_rank_metrics(results_dir), read_jsonl(mdir / "eval.jsonl")
    out = figures.metrics_summary(by_rank, evals, read_jsonl(mdir / "events.jsonl"), target, precision)
    if sampler is not None:
        out[F.TELEMETRY] = summarise_files([results_dir] + ([local] if local else []), own=node_id,
                                           source=sampler.kind, reason=sampler.reason,
                                           window=steady_window(by_rank),
                                           to_accuracy=accuracy_window(figures.accuracy_hit(evals, target)))
    out.update(nccl_transport(read_logs(results_dir)))
    busbw = read_jsonl(mdir / ALLREDUCE_LINES_FILE)  # the allreduce workload's lines, where it ran
    if busbw:
        out[F.BUSBW] = busbw_summary(busbw, instance_type=instance_type, nodes=out.get(F.NODES))
    return out


def accuracy_window(hit: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The wall times the time to accuracy spans: the trainer's start (the run's first attempt's, which a resumed
    attempt keeps) to the evaluation that first reached the target (``hit``); None without one."""
    wall, elapsed = (hit or {}).get("wall_time"), (hit or {}).get("elapsed_s")
    return (wall - elapsed, wall) if is_number(wall) and is_number(elapsed) and elapsed >= 0 else None


def what_ran_record(environ: Mapping[str, str], metrics: Mapping[str, Any], results_dir: Path,
                    nodes: int | None) -> dict[str, Any]:
    """The summary's ``what_ran`` and ``what_ran_unknown`` (workloads.train.harness.what_ran says where each comes from);
    ``nodes``: as the ranks' lines count them, else as launched (the launcher's ``--nodes``)."""
    nodes = metrics.get(F.NODES) or nodes
    ran, why = what_ran(environ=environ, device=metrics.get(F.DEVICE), nodes=nodes, log_texts=read_logs(results_dir),
                        efa_installed=read_efa_installer())
    return {F.WHAT_RAN: ran, F.WHAT_RAN_UNKNOWN: why}
