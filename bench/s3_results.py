"""The results on S3, as the launcher leaves them: read a summary, copy a run home, list runs.

Layout (``infra.environment``): ``s3://<bucket>/<project>/<stack>/<run-id>/<experiment>/`` holds
``summary.json`` (always written, even on failure: the authority on an experiment's end),
``progress.json`` (optional, ``workloads.train.progress``), ``metrics/``, ``logs/``, ``eval/``
and ``checkpoints/`` (never copied home: gigabytes, and useless without the cluster).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from spec.s3_uri import parse_s3_uri

SKIP_PREFIXES = ("checkpoints/",)


def client(region: str | None):
    import boto3

    return boto3.client("s3", region_name=region)


def _missing(e: Exception) -> bool:
    code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
    return code in ("NoSuchKey", "404", "NotFound", "NoSuchBucket")


def read_json(s3, uri: str, name: str, not_before: datetime | None = None) -> dict[str, Any] | None:
    """``<uri><name>`` parsed, or None when absent (or older than ``not_before``: a previous attempt's)."""
    bucket, prefix = parse_s3_uri(uri)
    try:
        obj = s3.get_object(Bucket=bucket, Key=prefix + name)
    except Exception as e:  # noqa: BLE001 - botocore's ClientError; absent is the common case
        if _missing(e):
            return None
        raise
    if not_before is not None and obj["LastModified"] < not_before:
        return None
    try:
        return json.loads(obj["Body"].read())
    except ValueError:
        return None


def keys_under(s3, uri: str) -> list[tuple[str, str]]:
    """(key, path relative to ``uri``) of every object under it."""
    bucket, prefix = parse_s3_uri(uri)
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents") or []:
            out.append((obj["Key"], obj["Key"][len(prefix):]))
    return out


def download(s3, uri: str, dest: Path) -> int:
    """Copy everything under ``uri`` to ``dest`` except checkpoints; returns the number of files."""
    bucket, _ = parse_s3_uri(uri)
    n = 0
    for key, rel in keys_under(s3, uri):
        if not rel or rel.endswith("/") or rel.startswith(SKIP_PREFIXES) or ".." in Path(rel).parts:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(target))
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
    """Keys of the summary.json files one level below ``uri`` (a run prefix)."""
    return [key for key, rel in keys_under(s3, uri) if rel.count("/") == 1 and rel.endswith("/summary.json")]
