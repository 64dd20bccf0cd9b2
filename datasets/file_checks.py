"""Checks a directory of files against a dataset's manifest: sizes and sha256s.

One definition of "this copy matches the manifest", shared by everything that checks
files: the staging Job in the pod (``datasets.stage``), the laptop's ``verify`` and
resumable uploads (``datasets.store``, ``datasets.prepare``) and the source checks
(``datasets.sources``), so the pod and the laptop agree on what a good copy is. The
staging ConfigMap ships this file to the pod next to ``stage.py``, so it is standard
library only.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

MANIFEST_NAME = "manifest.json"  # at the dataset's root: written last, so present means complete
CHUNK = 4 * 1024 * 1024  # read and hash in 4 MiB blocks, never a whole file at once


def sha256_file(path: str) -> str:
    """The hex sha256 of a file, read in chunks (never the whole file at once)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def check_file(root: str, entry: dict, *, hash_contents: bool = True) -> str:
    """'' when ``root/entry.path`` matches the manifest entry; otherwise what is wrong."""
    path = os.path.join(root, entry["path"])
    try:
        size = os.path.getsize(path)
    except OSError:
        return f"{entry['path']}: missing"
    if size != entry["size"]:
        return f"{entry['path']}: size {size}, manifest says {entry['size']}"
    if hash_contents:
        digest = sha256_file(path)
        if digest != entry["sha256"]:
            return f"{entry['path']}: sha256 {digest[:16]}..., manifest says {entry['sha256'][:16]}..."
    return ""


def check_tree(root: str, manifest: dict, *, hash_contents: bool = True, workers: int = 8) -> list[str]:
    """Every problem found checking ``root`` against ``manifest``, one line per file."""
    with ThreadPoolExecutor(workers) as pool:
        results = pool.map(lambda e: check_file(root, e, hash_contents=hash_contents), manifest["files"])
        return [r for r in results if r]
