"""The results layout has one home, ``core.contract.results_location``: its places, and the bucket rule."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.contract.results_location import ResultsLocation, datasets_uri, results_bucket

ROOT = Path(__file__).resolve().parents[2]


def test_each_level_of_the_layout():
    project = ResultsLocation("bkt", "eksbench")
    stack = project.child("dev")
    run = stack.child("r1")
    exp = run.child("resnet")
    assert exp == ResultsLocation("bkt", "eksbench", "dev", "r1", "resnet")
    assert [p.prefix for p in (project, stack, run, exp)] == [
        "eksbench/", "eksbench/dev/", "eksbench/dev/r1/", "eksbench/dev/r1/resnet/"]
    assert exp.uri == "s3://bkt/eksbench/dev/r1/resnet/" and project.uri == "s3://bkt/eksbench/"
    assert exp.local_dir("results") == Path("results/dev/r1/resnet")  # no project level on the user's machine
    assert run.local_dir(Path("/tmp/res")) == Path("/tmp/res/dev/r1")
    assert datasets_uri("bkt") == "s3://bkt/datasets/"


def test_a_place_without_its_bucket_has_a_prefix_but_no_uri():
    run = ResultsLocation(None, "eksbench", "dev", "r1")
    assert run.prefix == "eksbench/dev/r1/" and run.in_bucket("b").uri == "s3://b/eksbench/dev/r1/"
    with pytest.raises(ValueError, match="no bucket"):
        _ = run.uri


def test_a_level_cannot_be_skipped_or_passed():
    with pytest.raises(ValueError, match="missing above"):
        ResultsLocation("b", "eksbench", None, "r1")
    with pytest.raises(ValueError, match="deepest"):
        ResultsLocation("b", "eksbench", "dev", "r1", "e").child("x")


def results(bucket=None, home_stack=None):
    return SimpleNamespace(bucket=bucket, home_stack=home_stack)


def test_the_results_bucket_is_the_named_one_or_the_home_stacks():
    assert results_bucket(results(bucket="team"), None, region="us-west-2") == "team"
    home = results(home_stack="o/eksbench/home")
    assert results_bucket(home, {"bucket": "h", "region": "us-west-2"}, region="us-west-2") == "h"
    assert results_bucket(home, None, region="us-west-2") is None  # outputs not known (yet)
    with pytest.raises(ValueError, match="no output 'bucket'"):
        results_bucket(home, {}, region="us-west-2")
    with pytest.raises(ValueError, match="is in eu-west-1, this stack in us-west-2"):
        results_bucket(home, {"bucket": "h", "region": "eu-west-1"}, region="us-west-2")


# The layout spelled in code: an f-string joining project/stack/run/experiment parts with "/", a path
# joined from a stack and a run, the exported prefix split back apart, the datasets folder.
LAYOUT = [
    re.compile(r"\{[^{}]*project[^{}]*\}/"),
    re.compile(r"\{[^{}]*stack[^{}]*\}/\{"),
    re.compile(r"\{[^{}]*run[_a-z]*\}/\{"),
    re.compile(r"/\s*[\w.]*stack\s*/\s*[\w.]*run"),
    re.compile(r"\{[^{}]*prefix[^{}]*\}\{[^{}]*name[^{}]*\}/"),
    re.compile(r"rsplit\(\"/\",\s*2\)"),
    re.compile(r"s3://\{[^{}]*\}/datasets/"),
    re.compile(r"\{DATASETS_PREFIX\}"),
    re.compile(r"\{[^{}]*(stack|results)_prefix[^{}]*\}(\{|\w)"),
]
HOME = "core/contract/results_location.py"
# Lines that match a pattern but are no results location, each with why.
NOT_THE_LAYOUT = {
    ("infra/storage/image_repository.py", 'return f"{clean(project)}/{clean(stack)}/training"'): "the ECR repository name",
    ("bench/report/figures.py", 'f"{r.run_id}/{r.experiment}"'): "a plot label",
    ("bench/automation.py", "no logs for {stack}/{experiment}"): "words in a message",
}


def layout_spellings(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == HOME or rel.startswith(("tests/", ".")) or "/." in rel:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("#") or not any(p.search(line) for p in LAYOUT):
                continue
            if any(f == rel and text in line for f, text in NOT_THE_LAYOUT):
                continue
            found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_the_layout_is_spelled_in_its_home_only():
    found = layout_spellings(ROOT)
    assert not found, f"the results layout spelled outside {HOME} (use ResultsLocation):\n" + "\n".join(found)
