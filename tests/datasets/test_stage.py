"""The staging Job's program (datasets/stage.py), run here in-process against moto and a temp directory."""

from __future__ import annotations

import json
import shutil

import pytest

from datasets import stage
from datasets.catalog import CATALOG
from datasets.file_checks import check_tree
from datasets.prepare import prepare
from datasets.store import S3Store
from datasets.synthetic import SyntheticSpec
from tests.datasets.conftest import BUCKET

pytestmark = pytest.mark.local_run
PREFIX = "datasets/synthetic-imagefolder/"
URI = f"s3://{BUCKET}/{PREFIX}"


@pytest.fixture
def prepared(s3, tmp_path):
    return prepare(CATALOG["synthetic-imagefolder"], S3Store(BUCKET, PREFIX, client=s3), source=None,
                   work=tmp_path / "work", spec=SyntheticSpec(images=12, classes=3, resolution=32),
                   created_by="test", created_at="now", log=lambda m: None).manifest


def test_copy_then_recopy_only_what_changed(s3, prepared, tmp_path):
    dest = tmp_path / "data" / "datasets" / "synthetic-imagefolder"
    logs = []
    stage.stage_copy(s3, URI, str(dest), log=logs.append)
    assert check_tree(str(dest), prepared) == []
    assert json.loads((dest / "manifest.json").read_text())["files"] == prepared["files"]
    (dest / prepared["files"][0]["path"]).write_bytes(b"damaged")
    (dest / "train" / "class_from_an_old_version").mkdir()
    (dest / "train" / "class_from_an_old_version" / "x.JPEG").write_bytes(b"stale")
    stage.stage_copy(s3, URI, str(dest), log=logs.append)
    assert f"{len(prepared['files'])} files, 1 to copy" in logs[-2]
    assert "removed 1 files" in logs[-3] and not (dest / "train" / "class_from_an_old_version").exists()
    assert check_tree(str(dest), prepared) == []


def test_copy_refuses_an_object_that_differs_from_the_manifest(s3, prepared, tmp_path):
    victim = prepared["files"][2]["path"]
    s3.put_object(Bucket=BUCKET, Key=PREFIX + victim, Body=b"tampered")
    with pytest.raises(RuntimeError, match=f"{PREFIX}{victim}: sha256 .* does not match the manifest"):
        stage.stage_copy(s3, URI, str(tmp_path / "d"), log=lambda m: None)
    assert not (tmp_path / "d" / "manifest.json").exists()


def test_unprepared_prefix(s3, tmp_path):
    with pytest.raises(RuntimeError, match="manifest.json does not exist: the dataset was never prepared"):
        stage.stage_copy(s3, f"s3://{BUCKET}/datasets/cifar10/", str(tmp_path / "d"))


def test_fsx_mode_waits_for_the_import_then_preloads(s3, prepared, tmp_path):
    dest = tmp_path / "fsx"
    with pytest.raises(RuntimeError, match="files still not imported"):
        stage.stage_fsx(s3, URI, str(dest), preload=False, wait_s=0, log=lambda m: None)
    stage.stage_copy(s3, URI, str(tmp_path / "copy"), log=lambda m: None)
    shutil.copytree(tmp_path / "copy", dest)  # what the data repository association would show
    stage.stage_fsx(s3, URI, str(dest), preload=True, wait_s=0, log=lambda m: None)


def test_main_exit_codes(s3, prepared, tmp_path, capsys):
    assert stage.main(["--source", URI, "--dest", str(tmp_path / "d")]) == 0
    assert stage.main(["--source", f"s3://{BUCKET}/nothing/", "--dest", str(tmp_path / "e")]) == 1
    assert "error: s3://" in capsys.readouterr().err


def test_same_size_damage_after_staging_fails_the_check_then_the_retry_repairs_it(s3, prepared, tmp_path):
    dest = tmp_path / "d"
    assert stage.main(["--source", URI, "--dest", str(dest)]) == 0
    victim = dest / prepared["files"][1]["path"]
    data = victim.read_bytes()
    victim.write_bytes(bytes([data[0] ^ 1]) + data[1:])
    assert stage.main(["--source", URI, "--dest", str(dest)]) == 1  # the final check catches it; Job retries
    assert stage.main(["--source", URI, "--dest", str(dest)]) == 0  # no local manifest now: everything hashed
    assert victim.read_bytes() == data
