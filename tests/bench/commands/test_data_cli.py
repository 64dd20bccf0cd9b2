"""`python -m bench data ...` end to end: exit codes and the one-line messages."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile

import pytest

from bench.cli import main
from tests.datasets.conftest import BUCKET, cifar_tarball, keys_under, tells_size
from tests.datasets.test_hostile import PREFIX, URI, publish
from tests.datasets.test_hostile_properties import SETTINGS, Sandbox, given, manifests

SMALL = ["--images", "12", "--classes", "3", "--resolution", "32"]


def fails_with(capsys, argv, *fragments) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ")
    for fragment in fragments:
        assert fragment in last, last
    return last


def test_list_prints_every_dataset(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("synthetic", "synthetic-imagefolder", "cifar10", "tiny-imagenet-200", "imagenet", "coco2017"):
        assert f"\n{name} " in out
    assert "c58f30108f718f92721af3b95e74349a" not in out and "cs.toronto.edu" in out


def test_synthetic_has_nothing_to_prepare(capsys, tmp_path):
    assert main(["data", "prepare", "synthetic", "--to", str(tmp_path / "out")]) == 0
    assert "nothing to prepare" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_prepare_and_verify_a_local_directory(capsys, tmp_path):
    out = tmp_path / "out"
    assert main(["data", "prepare", "synthetic-imagefolder", "--to", str(out), "--work", str(tmp_path / "w")]
                + SMALL) == 0
    assert (out / "manifest.json").is_file() and len(list((out / "train").iterdir())) == 3
    assert main(["data", "verify", str(out)]) == 0
    victim = next((out / "val").rglob("*.JPEG"))
    victim.write_bytes(b"not a jpeg")
    capsys.readouterr()
    assert main(["data", "verify", str(out)]) == 1
    assert f"BAD {victim.relative_to(out).as_posix()}: size 10" in capsys.readouterr().out


def test_prepare_and_verify_s3(s3, capsys, tmp_path):
    uri = f"s3://{BUCKET}/datasets/synthetic-imagefolder/"
    assert main(["data", "prepare", "synthetic-imagefolder", "--to", uri, "--work", str(tmp_path / "w")] + SMALL) == 0
    assert "15 uploaded, 0 already there" in capsys.readouterr().out
    assert main(["data", "verify", uri]) == 0
    key = next(k for k in keys_under(s3, "datasets/synthetic-imagefolder/") if k.startswith("train/"))
    s3.put_object(Bucket=BUCKET, Key="datasets/synthetic-imagefolder/" + key, Body=b"garbage")
    capsys.readouterr()
    assert main(["data", "verify", uri]) == 1
    out = capsys.readouterr()
    assert f"BAD {key}: size 7" in out.out and "1 of 15 files bad or missing" in out.err


def test_imagenet_needs_from(capsys, tmp_path):
    fails_with(capsys, ["data", "prepare", "imagenet", "--to", str(tmp_path / "o")], "imagenet: --from PATH is required",
               "image-net.org")


def test_imagenet_from_a_folder_without_classes(capsys, tmp_path):
    (tmp_path / "imagenet" / "train").mkdir(parents=True)
    fails_with(capsys, ["data", "prepare", "imagenet", "--to", str(tmp_path / "o"), "--from", str(tmp_path / "imagenet")],
               "train: no class folders", "train/<wnid>/*.JPEG")


def test_missing_source(capsys, tmp_path):
    fails_with(capsys, ["data", "prepare", "cifar10", "--to", str(tmp_path / "o"), "--from", str(tmp_path / "nope.tgz"),
                        "--work", str(tmp_path / "w")], f"--from '{tmp_path / 'nope.tgz'}' does not exist")


def test_unreachable_url(capsys, tmp_path):
    url = "http://127.0.0.1:9/cifar-10-python.tar.gz"  # loopback discard port: refused at once
    fails_with(capsys, ["data", "prepare", "cifar10", "--to", str(tmp_path / "o"), "--from", url,
                        "--work", str(tmp_path / "w")],
               f"cannot reach URL {url}: ", "download it yourself and pass --from PATH")
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_source_not_matching_the_published_file(capsys, tmp_path):
    tarball = tmp_path / "cifar-10-python.tar.gz"
    cifar_tarball(tarball)
    fails_with(capsys, ["data", "prepare", "cifar10", "--to", str(tmp_path / "o"), "--from", str(tarball),
                        "--work", str(tmp_path / "w")],
               "but the published cifar-10-python.tar.gz is 170498071 bytes")
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_missing_bucket(aws, capsys, tmp_path):
    fails_with(capsys, ["data", "prepare", "synthetic-imagefolder", "--to", "s3://no-such-bucket/d/",
                        "--work", str(tmp_path / "w")] + SMALL, "bucket 'no-such-bucket' does not exist")


def test_bucket_without_permission(s3, capsys, tmp_path, monkeypatch):
    from botocore.exceptions import ClientError

    def deny(params, **kwargs):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListObjectsV2")

    s3.meta.events.register("before-parameter-build.s3.ListObjectsV2", deny)
    monkeypatch.setattr("datasets.store.s3_client", lambda: s3)
    fails_with(capsys, ["data", "prepare", "synthetic-imagefolder", "--to", f"s3://{BUCKET}/d/",
                        "--work", str(tmp_path / "w")] + SMALL,
               f"no permission to list s3://{BUCKET}/d/ (AccessDenied)", "s3:PutObject")


@pytest.mark.parametrize("argv, fragment", [
    (["data", "prepare", "mnist", "--to", "x"], "dataset 'mnist' is not in the catalog; choose one of synthetic,"),
    (["data", "prepare", "synthetic-imagefolder", "--to", "x", "--classes", "0"], "--classes 0: must be between 1"),
    (["data", "prepare", "cifar10", "--to", "gs://bucket/x"], "only s3:// URIs and local directories"),
    (["data", "prepare", "synthetic-imagefolder", "--to", "x", "--from", "y"], "takes no source"),
])
def test_bad_arguments(capsys, tmp_path, monkeypatch, argv, fragment):
    monkeypatch.chdir(tmp_path)
    fails_with(capsys, argv + ["--work", str(tmp_path / "w")], fragment)


def test_verify_without_manifest(capsys, tmp_path):
    fails_with(capsys, ["data", "verify", str(tmp_path)], "no manifest.json")


def test_dry_run_says_what_it_would_do_and_does_nothing(capsys, tmp_path):
    argv = ["data", "prepare", "synthetic-imagefolder", "--to", str(tmp_path / "o"), "--work", str(tmp_path / "w"),
            "--dry-run"] + SMALL
    assert main(argv) == 0
    assert "would generate 12 train + 3 val JPEGs (3 classes, 32 px, seed 0)" in capsys.readouterr().out
    assert not (tmp_path / "o").exists() and not (tmp_path / "w").exists()


# --- bench data verify, S3 (moved beside the command line it drives) -------------------------------------------

def test_s3_verify_refuses_keys_escaping_the_prefix(s3, capsys):
    s3.put_object(Bucket=BUCKET, Key="datasets/other/x", Body=b"other dataset")
    publish(s3, {"train/a/1.jpg": b"one", "../other/x": b"other dataset"})
    assert main(["data", "verify", URI]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {URI}manifest.json is not an eksbench manifest: files[0]: path '../other/x'")


def test_s3_verify_reports_extras_and_extra_classes(s3, capsys):
    publish(s3, {"train/a/1.jpg": b"one"})
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "train/a/stray.jpg", Body=b"x")
    assert main(["data", "verify", URI]) == 0
    assert "EXTRA train/a/stray.jpg" in capsys.readouterr().out
    assert main(["data", "verify", "--strict", URI]) == 1
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "val/new/1.jpg", Body=b"x")
    assert main(["data", "verify", URI]) == 1
    assert "EXTRA CLASS val/new/" in capsys.readouterr().out


@SETTINGS
@given(manifests())
def test_verify_never_reaches_outside_the_root(generated):
    raw, _ = generated
    with tempfile.TemporaryDirectory() as base:
        box = Sandbox(base)
        with open(os.path.join(box.root, "manifest.json"), "wb") as f:
            f.write(box.fill(raw))
        out, err = io.StringIO(), io.StringIO()
        with box.watching(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["data", "verify", "--workers", "2", box.root])  # any exception fails the test
        box.check()
        assert code in (0, 1, 2), (code, err.getvalue())
        if code == 2:
            manifest = os.path.join(box.root, "manifest.json")
            assert err.getvalue().startswith(f"error: {manifest} is not an eksbench manifest: "), err.getvalue()
            assert err.getvalue().count("\n") == 1
        assert "secret" not in out.getvalue() + err.getvalue()
        assert not tells_size(out.getvalue(), len(b"results of another run"), base), out.getvalue()


def test_text_bytes_prepares_from_the_shipped_text_and_verifies(capsys, tmp_path):
    out = tmp_path / "text-bytes"
    assert main(["data", "prepare", "text-bytes", "--to", str(out), "--work", str(tmp_path / "w")]) == 0
    assert "text-bytes: 4 files, 660762 bytes" in capsys.readouterr().out
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.bin")) == [
        "train/shard_00000.bin", "train/shard_00001.bin", "train/shard_00002.bin", "val/shard_00000.bin"]
    assert main(["data", "verify", str(out)]) == 0
    fails_with(capsys, ["data", "prepare", "text-bytes", "--to", str(out), "--from", str(tmp_path)],
               "text-bytes is made from the text shipped with eksbench")
    fails_with(capsys, ["data", "prepare", "cifar10", "--to", str(out), "--max-tokens", "5"],
               "--max-tokens/--shard-tokens: cifar10 is not a token dataset")
    fails_with(capsys, ["data", "prepare", "fineweb-edu-10bt-sample", "--to", str(out)], "--from DIR is required")
