"""One handle for results from any folder of the project: ``<stack>[/<run-id>[/<experiment>]]`` under the results
root, a path (told apart by its first character, or by being there), or a path from the project folder; the same
for ``eksbench report``, ``eksbench compare`` and ``results.load`` (``bench.results.sources``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.results.sources import resolve_source
from core.contract.results_location import RunHandle, is_handle, parse_handle
from program.stack_files import ROOT
from tests.bench.conftest import summary, write_experiment

EXP = "resnet50-synthetic"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project with two runs of dev under results/, and its notebooks/ folder as the working folder."""
    top = tmp_path / "proj"
    top.mkdir()
    (top / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (top / "Pulumi.dev.yaml").write_text((ROOT / "Pulumi.dev.yaml").read_text())
    for run, rate in (("r1", 100.0), ("r2", 110.0)):
        write_experiment(top / "results", f"dev/{run}/{EXP}", summary(EXP, rate=rate))
    (top / "notebooks").mkdir()
    monkeypatch.chdir(top / "notebooks")
    monkeypatch.delenv("EKSBENCH_PROJECT_DIR", raising=False)
    return top


def test_a_handle_has_one_shape_and_a_path_is_told_apart_by_its_first_character():
    assert parse_handle("dev") == RunHandle("dev")
    assert parse_handle("dev/r1/") == RunHandle("dev", "r1")
    assert str(parse_handle("dev/r1/resnet50-synthetic")) == "dev/r1/resnet50-synthetic"
    assert parse_handle("dev/r1/x").local_dir("/res") == Path("/res/dev/r1/x")
    for path in ("./dev", "../dev", "/dev", "~/dev", ".hidden", "a/b/c/d", "a//b", "", "dev\n", "a\\b", "x/.."):
        assert not is_handle(path), path
    with pytest.raises(ValueError, match=r"^'a/b/c/d' is not a run handle: give <stack>\[/<run-id>\[/<experiment>\]\]"):
        parse_handle("a/b/c/d")


def test_a_source_is_a_path_here_a_handle_under_the_results_root_or_a_path_from_the_project(project, tmp_path):
    results = project / "results"
    assert resolve_source("s3://b/dev/r1") == "s3://b/dev/r1"
    assert resolve_source("dev") == str(results / "dev")
    assert resolve_source(f"dev/r1/{EXP}") == str(results / "dev" / "r1" / EXP)
    assert resolve_source("results/dev") == str(project / "results" / "dev")  # from notebooks/, the project's
    assert resolve_source("../results/dev/r2") == str(Path("../results/dev/r2"))  # a path, as given
    assert resolve_source("./dev") is None and resolve_source("dev/r9") is None  # an explicit path is not a handle
    other = tmp_path / "elsewhere"
    write_experiment(other, f"dev/r7/{EXP}", summary(EXP))
    assert resolve_source("dev/r7", results_root=other) == str(other / "dev" / "r7")
    (project / "notebooks" / "dev").mkdir()  # a folder here of the handle's name is the path given
    assert resolve_source("dev") == "dev"


def test_report_results_dev_works_from_a_sub_folder_of_the_project(project, capsys):
    """Before: ``error: no results at 'results/dev'`` from notebooks/, while ``status dev`` worked there."""
    from bench.cli import main

    assert main(["report", "results/dev", "--out", "a.html"]) == 0, capsys.readouterr().err
    assert main(["report", "dev/r1", "--out", "b.html"]) == 0, capsys.readouterr().err
    assert (project / "notebooks" / "a.html").is_file() and (project / "notebooks" / "b.html").is_file()
    assert main(["report", "dev/r9", "--out", "c.html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no results at 'dev/r9' (not a path here or in the project, "
                                               f"nor a run under {project / 'results'}): give a run handle"), err


def test_compare_and_load_take_the_same_handles_from_any_folder(project, capsys):
    from bench import results
    from bench.cli import main

    assert main(["compare", "dev/r1", "results/dev/r2"]) == 0
    out = capsys.readouterr().out
    assert f"A: {project / 'results' / 'dev' / 'r1'}" in out and f"B: {project / 'results' / 'dev' / 'r2'}" in out
    df = results.load("dev/r2", f"dev/r1/{EXP}")
    assert sorted(df["run_id"]) == ["r1", "r2"] and set(df["stack"]) == {"dev"}
    assert len(results.steps("dev/r1")) > 0
    with pytest.raises(results.NoResults):
        results.load("dev/r9")
