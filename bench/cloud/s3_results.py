"""The results on S3, as the launcher leaves them: read a summary, copy a run home, list runs.

Layout (``infra.environment``): ``s3://<bucket>/<project>/<stack>/<run-id>/<experiment>/`` holds
``summary.json`` (always written, even on failure: the authority on an experiment's end),
``progress.json`` (optional, ``workloads.train.harness.progress``), ``metrics/``, ``logs/``, ``eval/``
and ``checkpoints/`` (never copied home: gigabytes, and useless without the cluster).
"""

from __future__ import annotations

import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

from core.contract.names import CHECKPOINT_DIR
from core.contract.s3_uri import parse_s3_uri
from core.contract.results_location import is_run_summary

SKIP_PREFIXES = (f"{CHECKPOINT_DIR}/",)


def client(region: str | None):
    import boto3

    return boto3.client("s3", region_name=region)


def _code(e: Exception) -> str:
    return str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))


def _missing(e: Exception) -> bool:
    return _code(e) in ("NoSuchKey", "404", "NotFound", "NoSuchBucket")


def read_json(s3, uri: str, name: str, not_before: datetime | None = None) -> dict[str, Any] | None:
    """``<uri><name>`` read by its kind's reader (``bench.results.readers``: shape checked, bad fields
    dropped with one warning), or None when absent or older than ``not_before`` (a previous attempt's).
    A file that is there but unreadable (not a JSON object, past the readers' bounds) is ``{}``, with the
    reader's warning: it exists, so a watch waiting for it stops waiting."""
    from bench.results.readers import MAX_JSON_BYTES, reader_for

    bucket, prefix = parse_s3_uri(uri)
    try:
        # one byte more than the bound, so a file over it is known to be (RFC 9110 section 14.1.2)
        obj = s3.get_object(Bucket=bucket, Key=prefix + name, Range=f"bytes=0-{MAX_JSON_BYTES}")
    except Exception as e:  # noqa: BLE001 - botocore's ClientError; absent is the common case
        if _missing(e) or _code(e) == "InvalidRange":  # InvalidRange: an empty object
            return None
        raise
    if not_before is not None and obj["LastModified"] < not_before:
        return None
    doc = reader_for(name)(obj["Body"].read(MAX_JSON_BYTES + 1), f"{uri}{name}")
    return {} if doc is None else doc


def keys_under(s3, uri: str) -> list[tuple[str, str]]:
    """(key, path relative to ``uri``) of every object under it."""
    bucket, prefix = parse_s3_uri(uri)
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents") or []:
            out.append((obj["Key"], obj["Key"][len(prefix):]))
    return out


def download(s3, uri: str, dest: Path) -> int:
    """Copy everything under ``uri`` to ``dest`` except checkpoints; returns the number of files.

    Every key is untrusted (any pod of the run can write any key under the prefix): its path
    relative to ``uri`` must pass ``datasets.file_checks.relative_path_problem``, and it is
    written through ``bench.results.safe_paths.replace_under``, which follows no symlink and renames a
    finished copy over the file (a copy that fails half-way, a full disk, leaves what was there whole). A key
    that fails is skipped with one warning naming it; so is one whose folder is already a file.
    Folder-marker keys ("a/") are skipped quietly, as before.
    """
    from bench.results.safe_paths import UnsafePath, replace_under

    bucket, _ = parse_s3_uri(uri)
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    for key, rel in keys_under(s3, uri):
        if not rel or rel.endswith("/") or rel.startswith(SKIP_PREFIXES):
            continue
        try:
            with replace_under(dest, rel) as f:
                s3.download_fileobj(bucket, key, f)
        except (UnsafePath, FileExistsError, NotADirectoryError, IsADirectoryError) as e:
            warnings.warn(f"s3://{bucket}/{key!r}: not copied to {dest}: {e}", stacklevel=2)
            continue
        n += 1
    return n


def child_prefixes(s3, uri: str) -> list[str]:
    """The "folders" directly under ``uri`` (run ids under a stack prefix, experiments under a run)."""
    bucket, prefix = parse_s3_uri(uri)
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        out += [p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes") or []]
    return out


def summaries_under(s3, uri: str) -> list[str]:
    """Keys of the summaries under ``uri`` (a run prefix): each experiment's and each repeat's."""
    return [key for key, rel in keys_under(s3, uri) if is_run_summary(rel)]
