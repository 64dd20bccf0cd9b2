"""prepare -> S3 (moto): upload, skip on re-run, resume after an interruption, verify, multipart."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
from pathlib import Path

import pytest

from datasets.catalog import CATALOG
from datasets.errors import DataError
from datasets.prepare import prepare, verify
from datasets.store import S3Store, open_store
from datasets.synthetic import SyntheticSpec
from tests.datasets.conftest import BUCKET, Calls, cifar_tarball, keys_under

pytestmark = pytest.mark.local_run
SPEC = SyntheticSpec(images=24, classes=4, resolution=32, seed=7)


def run(store, tmp_path: Path, name="synthetic-imagefolder", **kw):
    ds = kw.pop("ds", CATALOG[name])
    return prepare(ds, store, work=tmp_path / "work", created_by="test", created_at="2026-11-22T00:00:00+00:00",
                   **({"source": None, "spec": SPEC, "log": lambda m: None} | kw))


def test_synthetic_upload_then_rerun_uploads_nothing(s3, tmp_path):
    calls = Calls(s3)
    first = run(S3Store(BUCKET, "datasets/synthetic-imagefolder/", client=s3), tmp_path)
    files = first.manifest["files"]
    assert first.uploaded == len(files) == 24 + 4 and first.manifest_written
    objects = keys_under(s3, "datasets/synthetic-imagefolder/")
    assert set(objects) == {f["path"] for f in files} | {"manifest.json"}
    assert sorted(calls.uploads) == sorted(["datasets/synthetic-imagefolder/" + f["path"] for f in files]
                                           + ["datasets/synthetic-imagefolder/manifest.json"])
    assert calls.uploads[-1].endswith("manifest.json")  # written last

    calls.keys = {op: [] for op in Calls.OPS}
    again = run(S3Store(BUCKET, "datasets/synthetic-imagefolder/", client=s3), tmp_path)
    assert calls.uploads == [] and again.uploaded == 0 and again.skipped == len(files)
    assert calls.keys["HeadObject"] == []  # the complete manifest vouches for the listed objects

    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key="datasets/synthetic-imagefolder/manifest.json")["Body"].read())
    assert manifest["dataset"] == "synthetic-imagefolder" and manifest["layout"] == "imagefolder"
    assert manifest["params"]["seed"] == 7 and manifest["created_by"] == "test"
    one = files[0]
    body = s3.get_object(Bucket=BUCKET, Key="datasets/synthetic-imagefolder/" + one["path"])["Body"].read()
    assert hashlib.sha256(body).hexdigest() == one["sha256"] and len(body) == one["size"]


def test_cifar_shaped_tarball_is_extracted_and_checked(s3, tmp_path):
    tarball = tmp_path / "cifar-10-python.tar.gz"
    md5 = cifar_tarball(tarball)
    # the real entry publishes the real tarball's size and md5; this one publishes the test tarball's
    source = dataclasses.replace(CATALOG["cifar10"].sources[0], size=tarball.stat().st_size, md5=md5)
    ds = dataclasses.replace(CATALOG["cifar10"], sources=(source,))
    result = run(S3Store(BUCKET, "datasets/cifar10/", client=s3), tmp_path, ds=ds, source=str(tarball), spec=None)
    paths = {f["path"] for f in result.manifest["files"]}
    assert {"cifar-10-batches-py/data_batch_1", "cifar-10-batches-py/test_batch",
            "cifar-10-batches-py/batches.meta"} <= paths and len(paths) == 7
    raw = s3.get_object(Bucket=BUCKET, Key="datasets/cifar10/cifar-10-batches-py/data_batch_3")["Body"].read()
    batch = pickle.loads(raw, encoding="latin1")  # how torchvision's CIFAR10 reads it
    assert batch["data"].shape == (20, 3072) and str(batch["data"].dtype) == "uint8" and len(batch["labels"]) == 20


def test_md5_mismatch_stops_before_any_upload(s3, tmp_path):
    tarball = tmp_path / "cifar-10-python.tar.gz"
    cifar_tarball(tarball)
    source = dataclasses.replace(CATALOG["cifar10"].sources[0], size=None)  # keep the published md5
    ds = dataclasses.replace(CATALOG["cifar10"], sources=(source,))
    calls = Calls(s3)
    with pytest.raises(DataError, match=r"checksum mismatch for .*cifar-10-python.tar.gz: md5 [0-9a-f]{32}, "
                                        r"expected c58f30108f718f92721af3b95e74349a"):
        run(S3Store(BUCKET, "datasets/cifar10/", client=s3), tmp_path, ds=ds, source=str(tarball), spec=None)
    assert calls.uploads == [] and keys_under(s3, "datasets/cifar10/") == {}


def test_interrupted_upload_resumes_without_resending(s3, tmp_path):
    prefix = "datasets/synthetic-imagefolder/"
    calls = Calls(s3, fail_after=9)
    with pytest.raises(DataError, match="cannot upload to s3://eksbench-datasets/datasets/synthetic-imagefolder/"):
        run(S3Store(BUCKET, prefix, client=s3, workers=4), tmp_path)
    sent_first = set(calls.keys["PutObject"])
    assert len(sent_first) == 9
    assert "manifest.json" not in keys_under(s3, prefix)  # no manifest for a half-uploaded dataset

    calls.fail_after = None  # the network is back
    calls = Calls(s3)
    result = run(S3Store(BUCKET, prefix, client=s3, workers=4), tmp_path)
    sent_second = set(calls.keys["PutObject"])
    assert set(calls.keys["HeadObject"]) == sent_first  # no manifest yet: each object's sha256 metadata is read
    all_keys = {prefix + f["path"] for f in result.manifest["files"]}
    assert sent_first.isdisjoint(sent_second)
    assert sent_second == (all_keys - sent_first) | {prefix + "manifest.json"}
    assert set(keys_under(s3, prefix)) == {f["path"] for f in result.manifest["files"]} | {"manifest.json"}
    assert verify(S3Store(BUCKET, prefix, client=s3))[1] == []


def test_changed_dataset_drops_the_old_manifest_before_uploading(s3, tmp_path):
    prefix = "datasets/synthetic-imagefolder/"
    run(S3Store(BUCKET, prefix, client=s3), tmp_path)
    calls = Calls(s3, fail_after=0)  # the new seed changes every image, and the network is down
    with pytest.raises(DataError):
        run(S3Store(BUCKET, prefix, client=s3), tmp_path, spec=dataclasses.replace(SPEC, seed=8))
    assert "manifest.json" not in keys_under(s3, prefix) and calls.uploads == []


def test_verify_names_corrupt_and_missing_objects(s3, tmp_path):
    prefix = "datasets/synthetic-imagefolder/"
    files = run(S3Store(BUCKET, prefix, client=s3), tmp_path).manifest["files"]
    bad, gone = files[3], files[5]
    body = s3.get_object(Bucket=BUCKET, Key=prefix + bad["path"])["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=prefix + bad["path"], Body=bytes([body[0] ^ 0xFF]) + body[1:])  # same size
    s3.delete_object(Bucket=BUCKET, Key=prefix + gone["path"])
    problems = verify(S3Store(BUCKET, prefix, client=s3)).problems
    assert len(problems) == 2
    assert any(p.startswith(bad["path"] + ": sha256") for p in problems)
    assert f"{gone['path']}: missing" in problems


def test_multipart_upload_carries_the_sha256(s3, tmp_path):
    from datasets.file_checks import sha256_file
    from datasets.file_manifest import FileEntry

    big = tmp_path / "big.bin"
    big.write_bytes(hashlib.sha256(b"x").digest() * (11 * 1024 * 1024 // 32))  # 11 MiB
    entry = FileEntry("weights/big.bin", big.stat().st_size, sha256_file(str(big)), big)
    store = S3Store(BUCKET, "mp/", client=s3, multipart_mib=5)
    calls = Calls(s3)
    store.put_files([entry], on_file=lambda f: None)
    assert calls.keys["CreateMultipartUpload"] == ["mp/weights/big.bin"] and len(calls.keys["UploadPart"]) == 3
    assert store.present([entry]) == {"weights/big.bin"}
    assert store.verify({"files": [{"path": entry.path, "size": entry.size, "sha256": entry.sha256}]}) == []


def test_missing_bucket_is_one_clear_error(aws, tmp_path):
    with pytest.raises(DataError, match="bucket 'no-such-bucket' does not exist"):
        run(open_store("s3://no-such-bucket/datasets/x/"), tmp_path)


def test_leftover_objects_are_reported_then_deleted_on_request(s3, tmp_path):
    prefix = "datasets/synthetic-imagefolder/"
    run(S3Store(BUCKET, prefix, client=s3), tmp_path)
    fewer = dataclasses.replace(SPEC, classes=2, images=8)
    logs = []
    run(S3Store(BUCKET, prefix, client=s3), tmp_path, spec=fewer, log=logs.append)
    assert any("files the manifest does not list, e.g. " in m and "--delete-extra" in m for m in logs)
    assert any(k.startswith("train/class_3/") for k in keys_under(s3, prefix))
    result = run(S3Store(BUCKET, prefix, client=s3), tmp_path, spec=fewer, delete_extra=True)
    assert set(keys_under(s3, prefix)) == {f["path"] for f in result.manifest["files"]} | {"manifest.json"}
