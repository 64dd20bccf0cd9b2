"""Property tests: generated manifests (paths with "..", absolute, backslashes, unicode, huge sizes, wrong
types, missing keys) thrown at the staging program (``stage_copy`` with a fake S3 client), and, with the same
generators, at ``bench data verify`` (LocalStore; tests/bench/commands/test_data_cli.py, beside the command line). Each run ends in success or one clear error naming the manifest, never another
exception, and nothing outside the dataset's root is opened, stat-ed, written or deleted: a sentinel
folder beside the root (reachable through ``..``, its absolute path, or a link planted in the root) is
watched by wrapping the file functions and by comparing it before and after."""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import io
import json
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datasets import stage

pytestmark = pytest.mark.hostile  # the hostile-input group: pytest -m hostile

SENTINEL = "{SENTINEL}"  # replaced by the sentinel's absolute path in each example
URI = "s3://eksbench-datasets/datasets/ds/"
PREFIX = "datasets/ds/"
SETTINGS = settings(max_examples=int(os.environ.get("EKSBENCH_HYPOTHESIS_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

component = st.one_of(st.sampled_from(["..", ".", "", "a", "train", "val", "link", "sentinel", "manifest.json",
                                       "1.jpg", "é", "a\\..\\..", "a\x00b", "\u202e", "x" * 300]),
                      st.text(min_size=1, max_size=8))
paths = st.one_of(
    st.sampled_from([SENTINEL, "../outside/sentinel", "link/sentinel", "train/../../outside/sentinel",
                     "..\\outside\\sentinel", "/etc/hostname", "train/a/1.jpg", "train/b/2.jpg"]),
    st.lists(component, min_size=1, max_size=4).map("/".join),
    st.builds(lambda p: "/" + p, st.lists(component, min_size=1, max_size=3).map("/".join)),
    st.text(max_size=20),
    st.one_of(st.none(), st.integers(), st.lists(st.text(max_size=3), max_size=2)),
)
weird = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=70),
                  st.integers(min_value=-2**70, max_value=2**70), st.lists(st.integers(), max_size=2))


@st.composite
def entries(draw):
    """(manifest entry, the object's bytes): consistent, or with a wrong or ill-typed size/sha256, or keys missing."""
    content = draw(st.binary(max_size=16))
    e = {"path": draw(paths), "size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
    how = draw(st.sampled_from(["good", "good", "sha", "size", "weird"]))
    if how == "sha":
        e["sha256"] = hashlib.sha256(content + b"!").hexdigest()
    elif how == "size":
        e["size"] = draw(st.integers(min_value=0, max_value=2**64))
    elif how == "weird":
        e[draw(st.sampled_from(["size", "sha256"]))] = draw(weird)
    for key in draw(st.sets(st.sampled_from(["path", "size", "sha256"]), max_size=1)):
        del e[key]
    return e, content


@st.composite
def manifests(draw):
    """(manifest bytes with SENTINEL unreplaced, {path: bytes} of the objects)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(st.binary(max_size=40), st.sampled_from([b"[]", b'{"files": []}', b"[" * 5000]))), {}
    pairs = draw(st.lists(entries(), max_size=5))
    files = [e for e, _ in pairs]
    m = {"format": 1, "dataset": "ds", "layout": draw(st.sampled_from(["imagefolder", "coco", 7])),
         "files": files}
    sizes = [e.get("size") for e in files]
    total = sum(sizes) if all(type(s) is int for s in sizes) else 0
    m["file_count"], m["total_bytes"] = draw(st.sampled_from([(len(files), total), (len(files), total),
                                                              (None, None), ("1", [])]))
    for key in draw(st.sets(st.sampled_from(["files", "file_count", "total_bytes"]), max_size=1)):
        m.pop(key)
    objects = {e["path"]: c for e, c in pairs if isinstance(e.get("path"), str)}
    return json.dumps(m).encode(), objects


class Sandbox:
    """base/root (the dataset, with a link to ../outside planted in it) and base/outside/sentinel."""

    def __init__(self, base: str):
        self.base, self.root, self.outside = base, os.path.join(base, "root"), os.path.join(base, "outside")
        os.makedirs(os.path.join(self.root, "train", "a"))
        os.makedirs(self.outside)
        self.sentinel = os.path.join(self.outside, "sentinel")
        with open(self.sentinel, "wb") as f:
            f.write(b"results of another run")
        with open(os.path.join(self.root, "train", "a", "1.jpg"), "wb") as f:
            f.write(b"old")
        os.symlink(self.outside, os.path.join(self.root, "link"))
        self.before = self.snapshot()
        self.touched: list[tuple[str, str]] = []

    def fill(self, raw: bytes) -> bytes:
        return raw.replace(SENTINEL.encode(), json.dumps(self.sentinel)[1:-1].encode())

    def snapshot(self):
        st_ = os.stat(self.sentinel)
        return sorted(os.listdir(self.base)), sorted(os.listdir(self.outside)), st_.st_mtime_ns, st_.st_size

    def outside_root(self, path, entry: bool = False) -> bool:
        """Whether ``path`` resolves into the sentinel's folder (``entry``: the directory entry itself,
        as unlink/rename see it, so removing a link planted in the root is not reaching outside)."""
        try:
            path = os.fsdecode(path)
            real = (os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path)) if entry
                    else os.path.realpath(path))
        except (TypeError, ValueError):
            return False
        outside = os.path.realpath(self.outside)
        return os.path.commonpath([real, outside]) == outside

    @contextlib.contextmanager
    def watching(self):
        """Records every open/stat/remove/replace of a path that resolves into the sentinel's folder."""
        def wrap(name, fn, entry):
            def recorder(*args, **kwargs):
                for path in args[:2] if name.endswith(("replace", "rename")) else args[:1]:
                    if isinstance(path, (str, bytes, os.PathLike)) and self.outside_root(path, entry):
                        self.touched.append((name, os.fsdecode(path)))
                return fn(*args, **kwargs)
            return recorder

        entries = {"remove", "unlink", "rmdir", "replace", "rename"}
        with pytest.MonkeyPatch.context() as mp:
            for module, names in ((builtins, ["open"]), (io, ["open"]),
                                  (os, ["open", "stat", "remove", "unlink", "rmdir", "replace", "rename"])):
                for name in names:
                    mp.setattr(module, name, wrap(f"{module.__name__}.{name}", getattr(module, name),
                                                  module is os and name in entries))
            yield

    def check(self):
        assert not self.touched, f"touched outside the root: {self.touched}"
        assert self.snapshot() == self.before
        with open(self.sentinel, "rb") as f:
            assert f.read() == b"results of another run"


class FakeS3:
    """The two calls stage_copy makes, served from a dict of keys."""

    class exceptions:
        class NoSuchKey(Exception):
            pass

    def __init__(self, objects: dict[str, bytes]):
        self.objects = objects

    def get_object(self, Bucket, Key):
        if Key not in self.objects:
            raise self.exceptions.NoSuchKey(Key)
        return {"Body": io.BytesIO(self.objects[Key])}


@SETTINGS
@given(manifests(), st.booleans())
def test_staging_never_reaches_outside_the_root(generated, stale_manifest):
    raw, objects = generated
    with tempfile.TemporaryDirectory() as base:
        box = Sandbox(base)
        raw = box.fill(raw)
        keys = {PREFIX + box.fill(p.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass"): c
                for p, c in objects.items()}
        client = FakeS3(keys | {PREFIX + "manifest.json": raw})
        if stale_manifest:  # an earlier staging's manifest, as hostile as the new one
            with open(os.path.join(box.root, "manifest.json"), "wb") as f:
                f.write(raw)
        with box.watching():
            try:
                stage.stage_copy(client, URI, box.root, workers=2, log=lambda m: None)
            except ValueError as e:
                assert str(e).startswith(f"{URI}manifest.json is not an eksbench manifest: "), e
            except RuntimeError as e:
                assert "does not match the manifest" in str(e) or "differ from the manifest" in str(e), e
        box.check()
