"""A stack name or a results name never builds a path outside the folder it belongs to: ``bench destroy
../../victim`` once deleted folders outside the checkout before Pulumi was called, and ``bench run .. --local``
wrote to ``results/../<run-id>``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import automation
from bench.cloud import pulumi_cli
from core.config.fields import ConfigError
from core.contract.results_location import ResultsLocation, segment_problem
from program.stack_files import check_stack_name

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.hostile


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder beside a victim folder, with a stand-in pulumi on PATH (the real one is not needed to
    reach the code that builds the work dir)."""
    proj = tmp_path / "project"
    proj.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", proj / "Pulumi.yaml")
    (proj / "bench").mkdir()
    victim = tmp_path / "victim"
    (victim / "bench").mkdir(parents=True)
    (victim / "bench" / "precious.txt").write_text("keep me")
    (victim / "Pulumi.yaml").write_text("keep me too")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "pulumi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return proj, victim


@pytest.mark.parametrize("name", ["../../../victim", "..", ".", ".hidden", "a/b", "", "x" * 101, "dev\n"])
def test_destroy_refuses_a_name_that_is_not_a_stack_name_and_touches_nothing(project, name):
    proj, victim = project
    with pytest.raises(ConfigError, match=r"^stack=.*: must be 1-100 letters, digits"):
        automation.destroy(name, root=proj, on_output=None, yes=True)
    assert (victim / "bench" / "precious.txt").read_text() == "keep me"
    assert not (victim / "Pulumi.yaml").is_symlink() and (victim / "Pulumi.yaml").read_text() == "keep me too"
    assert not (proj / ".eksbench").exists()


def test_the_cli_says_so_in_one_line(project):
    proj, victim = project
    done = subprocess.run([sys.executable, "-m", "bench", "destroy", "../../../victim"], cwd=proj,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert 'stack="../../../victim": must be 1-100 letters' in done.stderr
    assert (victim / "bench" / "precious.txt").exists()


def test_a_planted_link_as_the_work_dir_is_refused(project):
    proj, victim = project
    (proj / ".eksbench" / "work").mkdir(parents=True)
    (proj / ".eksbench" / "work" / "dev").symlink_to(victim)
    with pytest.raises(pulumi_cli.AutomationError, match="is not a folder of"):
        pulumi_cli.work_dir("dev", proj)
    assert not (victim / "Pulumi.yaml").is_symlink()


def test_run_local_refuses_dot_dot(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench", "run", "..", "--local", "--results-root",
                           str(tmp_path / "results")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and 'stack="..": must be' in done.stderr
    assert not (tmp_path / "results").exists() and not list(tmp_path.iterdir())


def test_one_rule_for_stack_names_and_one_for_results_folders():
    assert check_stack_name("dev") == "dev" and check_stack_name("p5-fsx.v2_b") == "p5-fsx.v2_b"
    assert [segment_problem(n) is None for n in ("run-001", "..", ".", "a/b", "a\\b", "", "x\x1b")] == \
        [True, False, False, False, False, False, False]
    with pytest.raises(ValueError, match=r"^run='\.\.': is '\.\.'"):
        ResultsLocation(None, "eksbench", "dev", "..")
    with pytest.raises(ValueError, match="experiment='a/b': holds a path separator"):
        ResultsLocation("b", "eksbench", "dev", "r1").child("a/b")
