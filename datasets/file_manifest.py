"""What a prepared dataset contains: the manifest written at its prefix root, last.

A manifest lists every file's relative path, size and sha256, plus the dataset's name,
layout and how it was made. Uploads, ``verify`` and the staging Job all check against
it; ``prepare`` writes it only after every file is in place, in one atomic write, so a
manifest present means the dataset is complete. Pure functions only: hashing and
checking files live in ``datasets.file_checks``, writing in ``datasets.store``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from datasets import file_checks
from datasets.file_checks import MANIFEST_NAME

FORMAT = 1

__all__ = ["MANIFEST_NAME", "FileEntry", "build_manifest", "manifest_bytes", "same_contents", "parse_manifest"]


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative, "/"-separated, e.g. "train/n01440764/n01440764_10026.JPEG"
    size: int
    sha256: str
    source: Path | None = None  # where the bytes are on this machine; not written to the manifest


def build_manifest(*, dataset: str, layout: str, files: list[FileEntry], created_by: str, created_at: str,
                   params: dict | None = None) -> dict:
    entries = sorted(files, key=lambda f: f.path)
    return {
        "format": FORMAT,
        "dataset": dataset,
        "layout": layout,
        "created_by": created_by,
        "created_at": created_at,
        "params": dict(params or {}),
        "file_count": len(entries),
        "total_bytes": sum(f.size for f in entries),
        "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in entries],
    }


def manifest_bytes(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()


def same_contents(a: dict | None, b: dict | None) -> bool:
    """True when two manifests describe the same dataset bytes (ignoring who made them and when)."""
    keys = ("dataset", "layout", "params", "files")
    return a is not None and b is not None and all(a.get(k) == b.get(k) for k in keys)


def parse_manifest(raw: bytes, where: str) -> dict:
    """The manifest in ``raw``; ValueError naming ``where`` if it is not one.

    The checks are ``datasets.file_checks.parse_manifest``'s, the ones the staging pod applies.
    """
    return file_checks.parse_manifest(raw, where)
