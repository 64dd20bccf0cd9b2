"""Hostile manifests and destinations: nothing outside a dataset's root is read, written or deleted,
and every malformed input is one line naming the file (or the endpoint), never a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from datasets import stage
from datasets.file_manifest import FileEntry, build_manifest, manifest_bytes
from tests.datasets.conftest import BUCKET

REPO = Path(__file__).resolve().parents[2]
PREFIX = "datasets/ds/"
URI = f"s3://{BUCKET}/{PREFIX}"


def entry(path: str, data: bytes) -> dict:
    return {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def manifest_of(entries: list[dict], layout: str = "imagefolder") -> bytes:
    files = [FileEntry(e["path"], e["size"], e["sha256"]) for e in entries]
    return manifest_bytes(build_manifest(dataset="ds", layout=layout, files=files, created_by="t", created_at="t"))


def publish(s3, files: dict[str, bytes], layout: str = "imagefolder") -> None:
    """Objects at PREFIX + path (S3 takes ".." in a key literally) and a manifest listing them."""
    for path, data in files.items():
        s3.put_object(Bucket=BUCKET, Key=PREFIX + path, Body=data)
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "manifest.json",
                  Body=manifest_of([entry(p, d) for p, d in files.items()], layout))


def cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env, check=False)


# --- the staging program (in the pod) -------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["../../results/run-001/exp/summary.json", "/abs/summary.json",
                                 "train\\..\\..\\x", "train//x", "train/./x"])
def test_stage_refuses_a_manifest_path_leading_out_of_the_dataset(s3, tmp_path, bad):
    shared = tmp_path / "data"
    victim = shared / "results" / "run-001" / "exp" / "summary.json"
    victim.parent.mkdir(parents=True)
    victim.write_text("the other run's summary")
    publish(s3, {"train/a/1.jpg": b"one", bad: b"overwritten"})
    dest = shared / "datasets" / "ds"
    with pytest.raises(ValueError, match=r"s3://eksbench-datasets/datasets/ds/manifest.json is not an eksbench "
                                         r"manifest: files\[\d\]: path .* (has|is|contains)"):
        stage.stage_copy(s3, URI, str(dest), log=lambda m: None)
    assert victim.read_text() == "the other run's summary"
    assert not (tmp_path / "abs").exists() and not (dest / "train" / "1.jpg").exists()


def test_stage_never_writes_through_a_link_planted_in_the_dataset(s3, tmp_path):
    outside = tmp_path / "data" / "results"
    outside.mkdir(parents=True)
    (outside / "keep.txt").write_text("results")
    dest = tmp_path / "data" / "datasets" / "ds"
    dest.mkdir(parents=True)
    (dest / "train").symlink_to(outside)  # planted by anything that can write the shared volume
    (dest / "val.jpg").symlink_to(outside / "keep.txt")
    publish(s3, {"train/a/1.jpg": b"one", "val.jpg": b"two"})
    stage.stage_copy(s3, URI, str(dest), log=lambda m: None)
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"] and (outside / "keep.txt").read_text() == "results"
    assert not (dest / "train").is_symlink() and (dest / "train" / "a" / "1.jpg").read_bytes() == b"one"
    assert not (dest / "val.jpg").is_symlink() and (dest / "val.jpg").read_bytes() == b"two"


def test_prune_removes_links_never_what_they_point_at(tmp_path):
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "f").write_text("x")
    root = tmp_path / "root"
    (root / "train").mkdir(parents=True)
    (root / "train" / "dirlink").symlink_to(outside)
    (root / "train" / "filelink").symlink_to(outside / "deep" / "f")
    (root / "listed").symlink_to(outside / "deep" / "f")  # even under a name the manifest lists
    removed = stage.prune(str(root), {"listed"})
    assert removed == ["listed", "train/dirlink", "train/filelink"]
    assert (outside / "deep" / "f").read_text() == "x" and not (root / "train").exists()


def test_a_malformed_staged_manifest_is_ignored_and_everything_rehashed(s3, tmp_path):
    publish(s3, {"train/a/1.jpg": b"one"})
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "manifest.json").write_bytes(b"\xff not json")
    logs = []
    stage.stage_copy(s3, URI, str(dest), log=logs.append)
    assert any(line.startswith(f"ignoring {dest / 'manifest.json'} is not an eksbench manifest") for line in logs)
    assert json.loads((dest / "manifest.json").read_text())["files"][0]["path"] == "train/a/1.jpg"
