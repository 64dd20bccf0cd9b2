"""Where results are read from: a local folder or an ``s3://`` prefix, at any level.

Both are reduced to a list of keys relative to the source; ``experiment_dirs`` (pure) groups those
keys into experiment folders (one per repeat of an experiment with repeats), recognised by
``summary.json``, by ``metrics/rank-N.jsonl`` or by ``logs/*.log`` (a run that died before its
summary). Reading failures warn with the file's name and read as missing. boto3 is imported only for
``s3://`` sources; it honours ``AWS_ENDPOINT_URL`` and the usual credentials.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from core.catalog.aws import credentials_problem
from core.contract.names import CHECKPOINT_DIR, LOGS_DIR, METRICS_DIR, SUMMARY_FILE
from core.contract.results_location import is_run_summary, repeat_number

MARKERS = (re.compile(re.escape(SUMMARY_FILE)), re.compile(re.escape(METRICS_DIR) + r"/rank-\d+\.jsonl"),
           re.compile(re.escape(LOGS_DIR) + r"/[^/]+\.log"))
WANTED = re.compile(r"summary\.json|metrics/[^/]+\.jsonl|logs/[^/]+\.log|eval/eval\.json|telemetry/[^/]+\.jsonl")
ENDS = tuple(re.compile(rf"(?:^|/)({m.pattern})$") for m in MARKERS)
SKIP_DIRS = {CHECKPOINT_DIR, "_data", "__pycache__"}
CHUNK_BYTES = 4 * 1024 * 1024  # a streamed file's piece: one local read, or one S3 range GET


def experiment_dirs(keys: list[str]) -> dict[str, set[str]]:
    """``{experiment dir: {file relative to it}}`` for the keys (relative, "/"-separated) we read.

    Linear in the keys (each key is matched against its own few ancestors, not every folder):
    a 10,000-experiment run lists 10,000s of keys.
    """
    dirs: set[str] = set()
    for key in keys:
        for marker in ENDS:
            m = marker.search(key)
            if m:
                dirs.add(key[:m.start(1)].rstrip("/"))
    out: dict[str, set[str]] = {d: set() for d in dirs}
    for key in keys:
        parts = key.split("/")
        for i in range(len(parts)):
            d = "/".join(parts[:i])
            if d in out:
                rel = "/".join(parts[i:])
                if WANTED.fullmatch(rel):
                    out[d].add(rel)
    return out


def ids_for(root_parts: tuple[str, ...], rel_dir: str) -> tuple[str | None, str | None, str | None]:
    """(stack, run_id, experiment): the last three names of root + relative dir, None-padded in front;
    a repeat's folder (``<experiment>/repeat_<k>/``, core.contract.results_location) is not one of them."""
    parts = tuple(root_parts) + tuple(p for p in rel_dir.split("/") if p)
    if parts and repeat_number(parts[-1]) is not None:
        parts = parts[:-1]
    last = parts[-3:]
    return (None,) * (3 - len(last)) + tuple(last)  # type: ignore[return-value]


def repeat_for(root_parts: tuple[str, ...], rel_dir: str) -> int:
    """Which repeat a folder holds: k for ``repeat_<k>``, 1 for an experiment run without repeats."""
    parts = tuple(root_parts) + tuple(p for p in rel_dir.split("/") if p)
    return (repeat_number(parts[-1]) if parts else None) or 1


@dataclass
class ExperimentFiles:
    """One experiment folder's files we read, and how to read them."""

    ids: tuple[str | None, str | None, str | None]
    location: str
    files: set[str]
    # reader(rel, start, length): ``length`` bytes from ``start``; a negative start counts from the end
    reader: Callable[[str, int, int], bytes] = field(repr=False)
    repeat: int = 1  # k of <experiment>/repeat_<k>/; 1 for an experiment run without repeats

    def name(self, rel: str) -> str:
        return f"{self.location.rstrip('/')}/{rel}"

    def read_bytes(self, rel: str, limit: int, *, tail: bool = False) -> tuple[bytes, bool] | None:
        """(at most ``limit`` bytes of the file, its head or its tail; whether more was there), None if absent.

        An unreadable file warns and reads as absent. One byte more than ``limit`` is asked for,
        so a file cut here is known to be cut.
        """
        if rel not in self.files:
            return None
        try:
            data = self.reader(rel, -(limit + 1) if tail else 0, limit + 1)
        except Exception as e:  # noqa: BLE001 -- OSError, botocore errors: reported, never raised
            warnings.warn(f"{self.name(rel)}: could not be read ({type(e).__name__}: {e})", stacklevel=2)
            return None
        if len(data) <= limit:
            return data, False
        return (data[1:] if tail else data[:limit]), True

    def chunks(self, rel: str, limit: int, size: int | None = None) -> Iterator[bytes]:
        """The file's first ``limit`` + 1 bytes (one more tells a file cut at ``limit``) in pieces of at most
        ``size``, one at a time: a large file is never in memory whole. Nothing when it is absent; a failed read
        warns and ends the file there."""
        start, size = 0, size or CHUNK_BYTES
        while rel in self.files and start <= limit:
            want = min(size, limit + 1 - start)
            try:
                data = self.reader(rel, start, want)
            except Exception as e:  # noqa: BLE001 -- OSError, botocore errors: reported, never raised
                warnings.warn(f"{self.name(rel)}: could not be read ({type(e).__name__}: {e})", stacklevel=2)
                return
            yield data
            if len(data) < want:
                return
            start += want

    def read_text(self, rel: str, limit: int = 4 * 1024 * 1024) -> str | None:
        """The first ``limit`` bytes of the file as text (a larger file reads as absent, with a warning)."""
        got = self.read_bytes(rel, limit)
        if got is None:
            return None
        if got[1]:
            warnings.warn(f"{self.name(rel)}: larger than {limit:,} bytes; ignored", stacklevel=2)
            return None
        return got[0].decode("utf-8", "replace")


def exists(path: str | os.PathLike, *, folder: bool = False) -> bool:
    """Whether ``path`` is there (a folder, with ``folder``): False, not an OSError, for a path the file system
    cannot look up at all (a name past 255 bytes: ENAMETOOLONG), so a command says "no results at" it."""
    try:
        return Path(path).is_dir() if folder else Path(path).exists()
    except OSError:
        return False


def find_experiments(source: str) -> list[ExperimentFiles] | None:
    """The experiment folders under a local path or an s3:// prefix; None (with a warning) if unreadable."""
    if source.startswith("s3://"):
        return _s3(source)
    return _local(Path(source))


def _group(root_parts: tuple[str, ...], location: str, keys: list[str],
           read: Callable[[str, int, int], bytes]) -> list[ExperimentFiles]:
    out = []
    for d, files in sorted(experiment_dirs(keys).items()):
        prefix = f"{d}/" if d else ""
        out.append(ExperimentFiles(ids=ids_for(root_parts, d), location=f"{location.rstrip('/')}/{d}".rstrip("/"),
                                   files=files, reader=lambda rel, start, n, p=prefix: read(p + rel, start, n),
                                   repeat=repeat_for(root_parts, d)))
    return out


def _read_local(root: Path, key: str, start: int, length: int) -> bytes:
    """``length`` bytes of a regular file under ``root`` from ``start`` (negative: from the end); no symlinks."""
    from bench.results.safe_paths import open_under

    with open_under(root, key, os.O_RDONLY, names_from_disk=True) as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size + start) if start < 0 else start)
        return f.read(length)


def _read_s3(client, bucket: str, key: str, start: int, length: int) -> bytes:
    """Up to ``length`` bytes of an object by a Range GET; an empty object answers InvalidRange (416)."""
    try:
        return client.get_object(Bucket=bucket, Key=key, Range=_range(start, length))["Body"].read(length)
    except Exception as e:  # noqa: BLE001 -- botocore's ClientError, told apart by its code
        if str(getattr(e, "response", {}).get("Error", {}).get("Code", "")) == "InvalidRange":
            return b""
        raise


def _range(start: int, length: int) -> str:
    """An HTTP Range header value (RFC 9110 section 14.1.2: "bytes=-N" is the last N bytes)."""
    return f"bytes=-{length}" if start < 0 else f"bytes={start}-{start + length - 1}"


def _local(root: Path) -> list[ExperimentFiles]:
    if not exists(root, folder=True):
        warnings.warn(f"{root}: no such directory", stacklevel=3)
        return None
    root = root.resolve()
    keys = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        rel = PurePosixPath(Path(dirpath).relative_to(root).as_posix())
        keys += [str(rel / f) if str(rel) != "." else f for f in filenames]
    return _group(root.parts[1:], str(root), keys, lambda key, start, n: _read_local(root, key, start, n))


def _s3(uri: str) -> list[ExperimentFiles]:
    import boto3

    bucket, _, prefix = uri[len("s3://"):].partition("/")
    prefix = prefix.strip("/")
    keys = []
    try:  # the client too: an AWS_PROFILE that names no profile fails at its creation
        client = boto3.client("s3")
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else "")
        for page in pages:
            keys += [o["Key"] for o in page.get("Contents", [])]
    except Exception as e:  # noqa: BLE001 -- no credentials, no bucket, no network: one line
        warnings.warn(_cannot_list(uri, e), stacklevel=3)
        return None
    base = f"{prefix}/" if prefix else ""
    rel = [k[len(base):] for k in keys if not any(p in SKIP_DIRS for p in k[len(base):].split("/")[:-1])]
    parts = (bucket, *[p for p in prefix.split("/") if p])
    return _group(parts, f"s3://{bucket}/{prefix}",
                  rel, lambda key, start, n: _read_s3(client, bucket, base + key, start, n))


def _cannot_list(uri: str, e: Exception) -> str:
    """One line for a listing S3 refused: how to provide credentials when there are none, else the error."""
    return credentials_problem(e, uri) or f"{uri}: could not list objects ({type(e).__name__}: {e})"


def files_named(source: str, name: str, limit: int, most: int = 100) -> list[tuple[str, bytes]]:
    """(location, at most ``limit`` + 1 bytes) of each file called ``name`` under the source (run-level files
    such as ``timeline.json``), the first ``most`` in key order; unreadable ones warn and are left out."""
    found: list[tuple[str, bytes]] = []
    if source.startswith("s3://"):
        import boto3

        bucket, _, prefix = source[len("s3://"):].partition("/")
        prefix = prefix.strip("/")
        try:
            client = boto3.client("s3")
            keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{prefix}/" if prefix else "") for o in page.get("Contents", [])
                if o["Key"].rsplit("/", 1)[-1] == name]
        except Exception as e:  # noqa: BLE001 -- one line, as for the experiments
            warnings.warn(_cannot_list(source, e), stacklevel=2)
            return []
        for key in sorted(keys)[:most]:
            try:
                found.append((f"s3://{bucket}/{key}", _read_s3(client, bucket, key, 0, limit + 1)))
            except Exception as e:  # noqa: BLE001
                warnings.warn(f"s3://{bucket}/{key}: could not be read ({type(e).__name__}: {e})", stacklevel=2)
        return found
    root = Path(source)
    if not root.is_dir():
        return []
    root = root.resolve()
    keys = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        keys += [Path(dirpath, f).relative_to(root).as_posix() for f in filenames if f == name]
    for key in sorted(keys)[:most]:
        try:
            found.append((str(root / key), _read_local(root, key, 0, limit + 1)))
        except OSError as e:
            warnings.warn(f"{root / key}: could not be read ({type(e).__name__}: {e})", stacklevel=2)
    return found


def existing_summaries(run_dir: Path) -> list[Path]:
    """The summaries already in a run's folder: each experiment's and each repeat's (``<exp>/repeat_<k>/``)."""
    if not run_dir.is_dir():
        return []
    return sorted(p for p in run_dir.glob(f"*/**/{SUMMARY_FILE}") if is_run_summary(p.relative_to(run_dir).as_posix()))
