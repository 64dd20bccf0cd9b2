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
from tests.datasets.conftest import BUCKET, tells_size

pytestmark = pytest.mark.hostile  # the hostile-input group: pytest -m hostile

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


# --- bench data verify, local directories ------------------------------------------------------------------

@pytest.fixture
def local(tmp_path):
    """A prepared local dataset ``root`` and a secret file beside it."""
    root = tmp_path / "root"
    (root / "train" / "a").mkdir(parents=True)
    (root / "train" / "a" / "1.jpg").write_bytes(b"one")
    secret = tmp_path / "secret"
    secret.write_bytes(b"s3cr3t-contents")
    return root, secret


def write_manifest(root: Path, entries: list[dict], layout: str = "imagefolder") -> None:
    (root / "manifest.json").write_bytes(manifest_of(entries, layout))


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_verify_refuses_paths_outside_the_dataset(local, how):
    root, secret = local
    path = str(secret) if how == "absolute" else "../secret"
    write_manifest(root, [entry("train/a/1.jpg", b"one"), {"path": path, "size": 1, "sha256": "0" * 64}])
    run = cli("data", "verify", str(root))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith(f"error: {root / 'manifest.json'} is not an eksbench manifest: files[")
    assert not tells_size(run.stdout + run.stderr, len(b"s3cr3t-contents"), secret.parent)  # the size is not told


def test_verify_does_not_follow_a_link_out_of_the_dataset(local):
    root, secret = local
    (root / "train" / "b").symlink_to(secret.parent)
    write_manifest(root, [entry("train/a/1.jpg", b"one"), {"path": "train/b/secret", "size": 1, "sha256": "0" * 64}])
    run = cli("data", "verify", str(root))
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "BAD train/b/secret: refused" in run.stdout and "leads outside" in run.stdout
    assert not tells_size(run.stdout, len(b"s3cr3t-contents"), secret.parent)


def test_verify_reports_extra_files_and_fails_on_extra_classes(local):
    root, _ = local
    write_manifest(root, [entry("train/a/1.jpg", b"one")])
    (root / "notes.txt").write_text("x")
    run = cli("data", "verify", str(root))
    assert run.returncode == 0 and "EXTRA notes.txt" in run.stdout and "1 files the manifest does not list" in run.stdout
    strict = cli("data", "verify", "--strict", str(root))
    assert strict.returncode == 1 and "(--strict)" in strict.stderr
    (root / "train" / "zzz").mkdir()  # an empty class folder still changes ImageFolder's classes
    run = cli("data", "verify", str(root))
    assert run.returncode == 1 and "EXTRA CLASS train/zzz/" in run.stdout, run.stdout
    assert "1 class folders the manifest does not list" in run.stderr


def test_extra_class_folders_count_only_for_imagefolder(local):
    root, _ = local
    write_manifest(root, [entry("train/a/1.jpg", b"one")], layout="cifar-batches")
    (root / "train" / "zzz").mkdir()
    (root / "train" / "zzz" / "x").write_text("x")
    run = cli("data", "verify", str(root))
    assert run.returncode == 0 and "EXTRA train/zzz/x" in run.stdout and "EXTRA CLASS" not in run.stdout


@pytest.mark.parametrize("raw, fragment", [
    (b"{not json", "not JSON in UTF-8"),
    (b'{"files": [{"size": 1, "sha256": "' + b"0" * 64 + b'"}]}', "files[0] has no 'path'"),
    (b'{"files": [], "x": "\xff\xfe"}', "not JSON in UTF-8"),
    (b'{"files": []}', "no 'file_count'"),
    (b'{"files": {}}', "no 'files' list"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (b'{"files": [{"path": 7, "size": "1", "sha256": 3}], "file_count": 1, "total_bytes": 1}', "is not a string"),
    (b'{"files": [{"path": "a", "size": true, "sha256": "' + b"0" * 64 + b'"}], "file_count": 1, "total_bytes": 1}',
     "size True is not a byte count"),
    (b'{"files": [], "file_count": 0, "total_bytes": "0"}', "'total_bytes' is '0'"),
    pytest.param(b"[" * 100_000, "not JSON in UTF-8", id="nested-100000-deep"),
])
def test_malformed_manifests_are_one_line_naming_the_file(tmp_path, raw, fragment):
    (tmp_path / "manifest.json").write_bytes(raw)
    run = cli("data", "verify", str(tmp_path))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith(f"error: {tmp_path / 'manifest.json'} is not an eksbench manifest: ")
    assert fragment in run.stderr and run.stderr.count("\n") == 1, run.stderr


def test_a_manifest_that_is_not_a_regular_file(tmp_path):
    (tmp_path / "manifest.json").mkdir()
    run = cli("data", "verify", str(tmp_path))
    assert run.returncode == 2 and "Traceback" not in run.stderr and "it must be a regular file" in run.stderr


def test_unreachable_s3_endpoint_is_one_line_naming_it(tmp_path):
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard",
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    run = cli("data", "verify", "s3://eksbench-datasets/datasets/ds/", env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("error: cannot read s3://eksbench-datasets/datasets/ds/: ")
    assert f"127.0.0.1:{port}" in run.stderr and run.stderr.count("\n") == 1, run.stderr


# --- the staging program, S3 ----------------------------------------------------------------------------------


def test_stage_copies_a_long_unicode_name(s3, tmp_path):
    name = "é" * 127  # 254 bytes: a legal name, whose temp file must still fit NAME_MAX
    publish(s3, {f"train/a/{name}": b"one"})
    stage.stage_copy(s3, URI, str(tmp_path / "d"), log=lambda m: None)
    assert (tmp_path / "d" / "train" / "a" / name).read_bytes() == b"one"
