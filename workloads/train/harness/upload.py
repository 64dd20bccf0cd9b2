"""Uploading a node's results to S3 without stepping on the other nodes of the same job.

Ownership rule (see ``upload_plan``): the summary node (index 0) uploads the whole results
directory except other nodes' logs and telemetry; every other node uploads only ``logs/<its node id>.log`` (and
the ``.log.times`` beside it: when each line was captured) and ``telemetry/<its node id>.jsonl``, which it may
still be writing when the summary node uploads.
The launcher uploads them ``in_upload_order``: summary.json first.
The results directory lives on the shared file system, so node 0, which finishes after the
final barrier of all ranks, sees every rank's final metrics file; no two nodes ever upload the
same key with different content. Credentials come from boto3's default chain (EKS Pod Identity
in the cluster), never from arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.contract.names import CHECKPOINT_DIR, LOGS_DIR, SUMMARY_FILE, TELEMETRY_DIR, node_log, node_log_times, node_telemetry


def upload_plan(results_dir: str | Path, *, node_id: str, summary_node: bool, prefix: str) -> list[tuple[Path, str]]:
    """(local file, key) pairs this node owns."""
    root = Path(results_dir)
    # its log, when each line of it was captured, and its hardware samples
    own = [node_log(node_id), node_log_times(node_id), node_telemetry(node_id)]
    if not summary_node:
        return [(root / rel, f"{prefix}{rel}") for rel in own if (root / rel).is_file()]
    out = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name.startswith("."):  # temp files of atomic writes
            continue
        rel = p.relative_to(root).as_posix()
        if rel.startswith((f"{LOGS_DIR}/", f"{TELEMETRY_DIR}/")) and rel not in own:
            continue
        out.append((p, prefix + rel))
    return out


def in_upload_order(plan: list[tuple[Path, str]], prefix: str) -> list[tuple[Path, str]]:
    """``summary.json`` first, checkpoints last, the rest by key in between.

    summary.json is what ``bench run`` waits for and the record of the run; a pod can be stopped
    (SIGKILL at the end of its grace period) during a long upload, so it goes before the rest.
    Checkpoints are the largest files and ``bench run`` does not copy them back.
    """
    def rank(item: tuple[Path, str]) -> tuple[int, str]:
        key = item[1]
        return (0 if key == f"{prefix}{SUMMARY_FILE}" else 2 if key.startswith(f"{prefix}{CHECKPOINT_DIR}/") else 1), key

    return sorted(plan, key=rank)


def upload(plan: list[tuple[Path, str]], bucket: str, client: Any | None = None) -> list[str]:
    """Upload each file; returns the error messages (empty when all went up)."""
    errors = []
    try:
        if client is None:
            import boto3

            client = boto3.client("s3")
        for path, key in plan:
            try:
                client.upload_file(str(path), bucket, key)
            except Exception as e:  # noqa: BLE001 - report every failed file, keep going
                errors.append(f"s3://{bucket}/{key}: {type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - no client (no credentials, no boto3): report, never raise
        errors.append(f"s3://{bucket}/: {type(e).__name__}: {e}")
    return errors
