"""The experiment folders under the sources a reader names (folders, s3:// prefixes, run handles), and what it
is told when there are none: ``NoResults`` for a source that does not exist, ``UnreadableResults`` for one that
cannot be listed, a warning for an existing source with no experiment in it."""

from __future__ import annotations

import warnings
from pathlib import Path

from bench.results.files import ExperimentFiles, exists, find_experiments
from bench.results.sources import resolve_sources
from core.contract.s3_uri import parse_s3_uri

LOOKED_FOR = "experiment results (summary.json, metrics/ or logs/)"


class NoResults(FileNotFoundError, LookupError):
    """A source that does not exist. A LookupError too, so ``bench report`` says it in one line (exit 2)."""


class UnreadableResults(PermissionError, LookupError):
    """A source that cannot be listed (no AWS credentials, access denied, no network): ``load`` raises it with the
    one line that says why, where it once gave an empty frame and a warning."""


def _local_absent(source: str) -> str | None:
    """Why a local source cannot hold results (it is not there, or is a file), None when it is a folder."""
    if exists(source, folder=True):
        return None
    what = "not a folder" if exists(source) else "no such folder"
    return f"{source}: {what}; looked for {LOOKED_FOR} under it"


def _s3_absent(uri: str) -> str | None:
    """Why an s3:// source holds nothing (no bucket, no object under the prefix); None when it has objects or
    cannot be asked (no credentials, no network: ``find_experiments`` has warned)."""
    import boto3

    try:
        bucket, prefix = parse_s3_uri(uri)
    except ValueError:
        return None
    try:
        listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except Exception as e:  # noqa: BLE001 -- botocore's ClientError, told apart by its code
        code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
        return f"{uri}: no such bucket {bucket!r}; looked for {LOOKED_FOR}" if code == "NoSuchBucket" else None
    if listed.get("KeyCount", len(listed.get("Contents") or [])):
        return None
    return f"{uri}: no objects under s3://{bucket}/{prefix}; looked for {LOOKED_FOR}"


def experiments(sources: tuple[str, ...], strict: bool, results_root: str | Path | None = None
                ) -> list[ExperimentFiles]:
    """The experiment folders under the sources (run handles resolved under ``results_root``,
    ``bench.results.sources``); ``strict``: NoResults for a source that does not exist."""
    found = []
    for source in resolve_sources(sources, results_root=results_root):
        s3 = source.startswith("s3://")
        absent = _local_absent(source) if strict and not s3 else None
        if absent:
            raise NoResults(absent)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exps = find_experiments(source)
        if strict and exps is None and caught:  # a bucket that is not there is NoResults, below; else why not
            if not (s3 and _s3_absent(source)):
                raise UnreadableResults(str(caught[-1].message))
        for w in caught:  # not strict, or a warning about one file: passed on as it came
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        absent = _s3_absent(source) if strict and s3 and not exps else None
        if absent:
            raise NoResults(absent)
        if exps == []:
            warnings.warn(f"{source}: no experiment results found (no summary.json, metrics/ or logs/)", stacklevel=3)
        found += exps or []
    return found
