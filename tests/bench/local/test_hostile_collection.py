"""Copying a run home from S3 (``bench.cloud.s3_results.download``): no key writes outside its destination.

Any pod of a run can write any key under the run's prefix, so the keys are generated here:
empty, "." and ".." segments, leading slashes, backslashes, control characters, a key that is
also another key's folder, and a symlink already in the destination. moto answers in-process
(``mock_aws``) as S3 does: a key is any UTF-8 string up to 1,024 bytes
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
"""

from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("moto")

from bench.cloud import s3_results  # noqa: E402

pytestmark = pytest.mark.hostile  # the hostile-input group: pytest -m hostile

BUCKET, PREFIX = "results", "proj/st/run-1/exp/"
SEGMENTS = st.one_of(
    st.sampled_from(["", ".", "..", "a", "b", "link", "metrics", "checkpoints", "..\\..", "a\\b", "x\x00y",
                     "line\nbreak", "\x7f", " ", "summary.json"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=3))
KEYS = st.lists(st.lists(SEGMENTS, min_size=1, max_size=4).map("/".join).filter(lambda k: len(k.encode()) < 900),
                min_size=1, max_size=8, unique=True)


def _files(root: Path) -> set[str]:
    """Every file, folder and link under ``root``, as paths relative to it (links are not followed)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), root))
    return out


@pytest.fixture(scope="module")
def s3():
    """One in-process S3 for the module (starting moto per example costs about a second)."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


RUNS = itertools.count()


def _copy(s3, keys: list[str], work: Path):
    """Puts ``keys`` under a fresh run prefix, plants dest/link -> outside/, downloads; (n, warnings, dest, outside)."""
    prefix = PREFIX.replace("run-1", f"run-{next(RUNS)}")
    # deeper than KEYS has segments, so even "../../../.." on a broken copy stays inside ``work``
    dest, outside = work / "home" / "user" / "project" / "results" / "st" / "exp", work / "outside"
    dest.mkdir(parents=True)
    outside.mkdir()
    (dest / "link").symlink_to(outside, target_is_directory=True)
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=prefix + key, Body=b"from the pod: " + key.encode("utf-8", "replace"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        n = s3_results.download(s3, f"s3://{BUCKET}/{prefix}", dest)
    return n, [str(w.message).replace(prefix, PREFIX) for w in caught], dest, outside


def _assert_contained(work: Path, dest: Path, outside: Path) -> None:
    assert _files(outside) == set(), "a key was written through the planted symlink"
    real_dest = dest.resolve()
    for rel in _files(work):
        path = work / rel
        if path == dest / "link" or outside in path.parents or path == outside:
            continue
        if path in dest.parents or path == dest:
            continue
        assert real_dest in path.parents, f"{path} is outside {dest}"
        assert not path.is_symlink(), f"{path}: a symlink was made"


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(keys=KEYS)
def test_generated_key_layouts_never_write_outside_the_destination(s3, keys):
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # A leading "/" is kept, and points into ``work``: a broken copy then writes there, not to this machine's /
        keys = [f"{work}/abs{k}" if k.startswith("/") else k for k in keys]
        n, notes, dest, outside = _copy(s3, keys, work)
        _assert_contained(work, dest, outside)
        written = {p for p in _files(dest) if (dest / p).is_file() and not (dest / p).is_symlink()}
        assert n == len(written)
        for p in written:  # each file holds its own key's bytes: nothing was written under another name
            assert (dest / p).read_bytes() == b"from the pod: " + p.replace(os.sep, "/").encode()
        for note in notes:
            assert note.startswith(f"s3://{BUCKET}/'{PREFIX}") or note.startswith(f's3://{BUCKET}/"{PREFIX}'), note
            assert "not copied to" in note


def test_a_key_with_a_leading_slash_is_skipped_with_a_warning_naming_it(s3, tmp_path):
    """Before: ``dest / "/abs/path"`` is "/abs/path", so the pod chose where on the laptop to write."""
    target = tmp_path / "elsewhere" / "planted.sh"
    target.parent.mkdir()
    n, notes, dest, outside = _copy(s3, ["summary.json", str(target)], tmp_path / "w")
    assert not target.exists()
    assert n == 1 and (dest / "summary.json").is_file()
    assert len(notes) == 1 and str(target) in notes[0] and "is absolute" in notes[0]


def test_a_symlink_in_the_destination_is_not_followed(s3, tmp_path):
    """Before: dest/link -> outside/, and the key "link/evil" was written to outside/evil."""
    n, notes, dest, outside = _copy(s3, ["link/evil", "metrics/rank-0.jsonl"], tmp_path)
    assert _files(outside) == set()
    assert n == 1 and (dest / "metrics" / "rank-0.jsonl").is_file()
    assert len(notes) == 1 and "'link/evil'" in notes[0] and "symlink" in notes[0]


@pytest.mark.parametrize("key,why", [("a//b", "empty component"), ("./x", "'.' or '..'"),
                                     ("..\\..\\x", "backslash"), ("x\x1by", "control character")])
def test_each_unsafe_key_is_named_in_one_warning(s3, tmp_path, key, why):
    n, notes, dest, _ = _copy(s3, [key, "ok.log"], tmp_path)
    assert n == 1 and (dest / "ok.log").is_file()
    assert len(notes) == 1 and why in notes[0] and repr(key)[1:-1] in notes[0]


def test_a_copy_that_fails_half_way_leaves_the_file_that_was_there_whole(s3, tmp_path):
    """A full disk while a run comes home again (``--resume``): the copy goes to a temporary file, renamed over the
    summary only when whole. Before: the summary was truncated, then half written."""
    prefix = PREFIX.replace("run-1", f"run-{next(RUNS)}")
    s3.put_object(Bucket=BUCKET, Key=prefix + "summary.json", Body=b'{"status": "succeeded", "new": true}')
    dest = tmp_path / "exp"
    dest.mkdir()
    (dest / "summary.json").write_text('{"status": "succeeded"}')

    class DiskFills:
        """moto's client, whose download writes part of the object and then meets a full disk."""

        def get_paginator(self, name):
            return s3.get_paginator(name)

        def download_fileobj(self, bucket, key, f):
            f.write(b'{"status": "succ')
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        s3_results.download(DiskFills(), f"s3://{BUCKET}/{prefix}", dest)
    assert (dest / "summary.json").read_text() == '{"status": "succeeded"}'
    assert sorted(p.name for p in dest.iterdir()) == ["summary.json"]  # no temporary file left
    assert s3_results.download(s3, f"s3://{BUCKET}/{prefix}", dest) == 1  # a copy that works replaces it
    assert (dest / "summary.json").read_text() == '{"status": "succeeded", "new": true}'


# ---- what the watch in bench run and bench status read while a run goes ---------------------------------------

def test_the_watch_reads_summary_and_progress_through_their_readers(s3):
    """Before: a string where a number or object is reached bench run's live line (``f"{rate:.1f}"``) as it was."""
    prefix = PREFIX.replace("run-1", f"run-{next(RUNS)}")
    s3.put_object(Bucket=BUCKET, Key=prefix + "summary.json",
                  Body=b'{"status": "succeeded", "throughput": "fast", "wall_time_s": NaN}')
    s3.put_object(Bucket=BUCKET, Key=prefix + "progress.json", Body=b'{"step": "7", "samples_per_s": "many"}')
    s3.put_object(Bucket=BUCKET, Key=prefix + "eval.json", Body=b"[1, 2]")
    uri = f"s3://{BUCKET}/{prefix}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = s3_results.read_json(s3, uri, "summary.json")
        progress = s3_results.read_json(s3, uri, "progress.json")
        evaluation = s3_results.read_json(s3, uri, "eval.json")
    # a file that is there but not an object reads as {}: it exists, so a watch waiting for it stops waiting
    assert summary == {"status": "succeeded"} and progress == {} and evaluation == {}
    notes = [str(w.message) for w in caught]
    assert notes == [f"{uri}summary.json: ignored field(s) of the wrong type: throughput, wall_time_s",
                     f"{uri}progress.json: ignored field(s) of the wrong type: step, samples_per_s",
                     f"{uri}eval.json: expected a JSON object, found list; ignored"]


def test_bench_status_reads_a_local_summary_of_the_wrong_shape_as_no_status(tmp_path):
    """Before: ``json.loads(...).get("status")`` on a list stopped ``bench status`` with a traceback."""
    from bench.local.observe import local_runs as _local_runs

    (tmp_path / "st" / "r1" / "a").mkdir(parents=True)
    (tmp_path / "st" / "r1" / "a" / "summary.json").write_text("[1, 2]")
    (tmp_path / "st" / "r1" / "b").mkdir()
    (tmp_path / "st" / "r1" / "b" / "summary.json").write_text('{"status": "succeeded"}')
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert _local_runs(tmp_path, "st") == {"r1": {"a": "unknown (summary.json unreadable or without a status)",
                                                      "b": "succeeded"}}
