"""The staging Job's program: copies a prepared dataset from S3 onto the cluster's shared volume and checks it.

The staging Job (``datasets.staging_manifests.staging_job_manifest``) runs this file in a
stock Python image, so it imports only the standard library, the project's stdlib-only
modules (``datasets.file_checks``, ``core.contract.s3_uri``) and boto3 inside ``main`` (the Job
installs it when the image lacks it). The file checks live in ``datasets.file_checks``
so that the laptop's ``verify`` checks exactly as the pod does.

Modes:
  copy  (EFS)  download every file the manifest lists that is missing or differs,
               hashing while writing, read every file back against the manifest,
               then write manifest.json last (its presence marks a checked copy);
  fsx          the data repository association imports lazily: wait until every file
               is visible with the right size, without reading contents;
  fsx --preload  also ``lfs hsm_restore`` (when ``lfs`` exists) and read every file, so
               the first epoch does not measure S3 latency.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from core.contract.s3_uri import parse_s3_uri
from datasets.file_checks import (
    CHUNK,
    MANIFEST_NAME,
    check_file,
    check_tree,
    parse_manifest,
    read_regular_file,
    resolve_under,
)


def _download(client, bucket: str, key: str, root: str, expected: dict) -> int:
    """Streams one object to ``root/expected.path`` (via a temp file), hashing as it writes. Returns bytes.

    The destination must resolve inside ``root`` (no "..", no symbolic link on the way out);
    the temp file is created afresh (``mkstemp``), never through a link planted under its name.
    """
    try:
        dest = resolve_under(root, expected["path"])
    except ValueError as e:
        raise RuntimeError(f"refusing to write {expected['path']!r} under {root}: {e}") from None
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    dest = resolve_under(root, expected["path"])  # again: the folders now exist, none of them a link out
    h = hashlib.sha256()
    body = client.get_object(Bucket=bucket, Key=key)["Body"]
    # A fresh, uniquely named temp file (O_EXCL | O_NOFOLLOW): never one someone planted, never through a link.
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".eksbench-", suffix=".part")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "wb") as f:
        for block in iter(lambda: body.read(CHUNK), b""):
            h.update(block)
            f.write(block)
    if h.hexdigest() != expected["sha256"]:
        os.remove(tmp)
        raise RuntimeError(f"s3://{bucket}/{key}: sha256 {h.hexdigest()[:16]}... does not match the manifest "
                           f"({expected['sha256'][:16]}...); re-run `eksbench data prepare` for this dataset")
    os.replace(tmp, dest)  # rename replaces the entry at dest itself, even a symbolic link
    return expected["size"]


def prune(root: str, keep: set[str]) -> list[str]:
    """Deletes what under ``root`` is not a file in ``keep`` (relative paths), so an ImageFolder
    reader never sees a class folder left over from an earlier version of the dataset.

    Never follows a symbolic link: a link is removed itself (whatever its name, even one the
    manifest lists: the staged copy holds regular files only), and never walked into; so
    nothing outside ``root`` is ever deleted.
    """
    removed = []
    root = os.path.realpath(root)
    for folder, dirs, files in os.walk(root, topdown=False):  # followlinks=False: links are listed, not walked
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if os.path.islink(path) or (rel not in keep and rel != MANIFEST_NAME):
                os.unlink(path)  # removes the entry in this folder, never what a link points at
                removed.append(rel)
        if folder != root and not os.listdir(folder):
            os.rmdir(folder)
    return sorted(removed)


def read_manifest_s3(client, bucket: str, prefix: str) -> dict:
    where = f"s3://{bucket}/{prefix}{MANIFEST_NAME}"
    try:
        raw = client.get_object(Bucket=bucket, Key=prefix + MANIFEST_NAME)["Body"].read()
    except client.exceptions.NoSuchKey:
        raise RuntimeError(f"{where} does not exist: the dataset was never "
                           "prepared there (or its upload did not finish); run `eksbench data prepare`")
    return parse_manifest(raw, where)  # ValueError naming it when malformed or hostile


def read_staged_manifest(path: str, log=print) -> dict[str, str]:
    """What an earlier, completed staging copied and checked (path -> sha256), from its manifest at ``path``.

    Checked like any manifest; one that is not a regular file or does not pass is ignored
    (everything is hashed again), not trusted.
    """
    try:
        raw = read_regular_file(path)
    except FileNotFoundError:
        return {}
    except OSError as e:
        log(f"ignoring {path}: {e.strerror or e}")
        return {}
    try:
        return {e["path"]: e["sha256"] for e in parse_manifest(raw, path)["files"]}
    except ValueError as e:
        log(f"ignoring {e}")
        return {}


def stage_copy(client, source_uri: str, dest: str, *, workers: int = 16, log=print) -> dict:
    """Makes ``dest`` an exact, checked copy of the prepared dataset at ``source_uri``."""
    bucket, prefix = parse_s3_uri(source_uri)
    manifest = read_manifest_s3(client, bucket, prefix)
    os.makedirs(dest, exist_ok=True)
    local_manifest = os.path.join(dest, MANIFEST_NAME)
    staged = read_staged_manifest(local_manifest, log)  # path -> sha256 copied and checked earlier
    if os.path.lexists(local_manifest):
        os.unlink(local_manifest)  # the copy is about to change: no manifest until it is complete
    # Before anything is checked or written: whatever the manifest does not list goes, and so
    # does every symbolic link, so no later step can be led outside ``dest`` by one.
    removed = prune(dest, {e["path"] for e in manifest["files"]})
    if removed:
        log(f"removed {len(removed)} files the manifest does not list, e.g. {removed[0]}")

    def needed(e: dict) -> bool:  # files an earlier staging checked are hashed once, in the final check
        known = staged.get(e["path"]) == e["sha256"]
        return bool(check_file(dest, e, hash_contents=not known))

    with ThreadPoolExecutor(workers) as pool:
        todo = [e for e, need in zip(manifest["files"], pool.map(needed, manifest["files"])) if need]
    total = sum(e["size"] for e in todo)
    log(f"staging {source_uri} -> {dest}: {len(manifest['files'])} files, {len(todo)} to copy ({total} bytes)")
    start, done = time.monotonic(), 0
    with ThreadPoolExecutor(workers) as pool:
        for n in pool.map(lambda e: _download(client, bucket, prefix + e["path"], dest, e), todo):
            done += n
    seconds = time.monotonic() - start
    log(f"copied {done} bytes in {seconds:.1f} s ({done / max(seconds, 1e-9) / 1e6:.1f} MB/s)")
    problems = check_tree(dest, manifest, workers=workers)  # read back everything, old and new
    if problems:
        raise RuntimeError(f"{len(problems)} files differ from the manifest after copying, e.g. {problems[0]}")
    fd, tmp = tempfile.mkstemp(dir=dest, prefix=f".{MANIFEST_NAME}.", suffix=".part")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(tmp, local_manifest)
    return manifest


def stage_fsx(client, source_uri: str, dest: str, *, preload: bool, wait_s: float = 3600,
              poll_s: float = 15, log=print) -> dict:
    """Waits for the FSx data repository association to show every file; optionally preloads them."""
    bucket, prefix = parse_s3_uri(source_uri)
    manifest = read_manifest_s3(client, bucket, prefix)
    deadline = time.monotonic() + wait_s
    while True:
        problems = check_tree(dest, manifest, hash_contents=False)
        if not problems:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(problems)} files still not imported into {dest} after {wait_s:.0f} s, "
                               f"e.g. {problems[0]}; check the FSx data repository association for {source_uri}")
        log(f"waiting for the FSx import: {len(problems)} of {len(manifest['files'])} files not visible yet")
        time.sleep(poll_s)
    if preload:
        if shutil.which("lfs"):
            paths = [os.path.join(dest, e["path"]) for e in manifest["files"]]  # checked: all under dest
            for i in range(0, len(paths), 500):  # hsm_restore takes a file list; keep argv short
                subprocess.run(["lfs", "hsm_restore", *paths[i:i + 500]], check=False)
        problems = check_tree(dest, manifest, hash_contents=True)  # reading every file loads it from S3
        if problems:
            raise RuntimeError(f"{len(problems)} files differ from the manifest, e.g. {problems[0]}")
        log(f"preloaded and checked {len(manifest['files'])} files")
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", required=True, help="s3://bucket/prefix/<dataset>/")
    p.add_argument("--dest", required=True, help="<datasets_dir>/<dataset>")
    p.add_argument("--mode", choices=("copy", "fsx"), default="copy")
    p.add_argument("--preload", action="store_true")
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--wait-seconds", type=float, default=3600)
    args = p.parse_args(argv)
    import boto3  # installed by the Job's command when the image lacks it
    from botocore.exceptions import BotoCoreError, ClientError

    client = boto3.client("s3")
    try:
        if args.mode == "copy":
            stage_copy(client, args.source, args.dest, workers=args.workers)
        else:
            stage_fsx(client, args.source, args.dest, preload=args.preload, wait_s=args.wait_seconds)
    except (RuntimeError, ValueError, OSError, BotoCoreError, ClientError) as e:  # one line; the Job retries
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{args.dest}: staged and verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
