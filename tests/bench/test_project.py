"""The command line as an installed tool: ``pip install -e .`` gives ``eksbench``, which runs from any folder
against the project it finds (``bench.project``) or is given, and says its version."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from bench import __version__
from bench.project import NoProject, find_project_dir
from core.contract.names import ENV_PROJECT_DIR
from tests.test_import_graph import ROOT


def project(at: Path, name: str = "eksbench") -> Path:
    at.mkdir(parents=True, exist_ok=True)
    (at / "Pulumi.yaml").write_text(f"name: {name}\nruntime:\n  name: python\n")
    return at


def test_the_nearest_project_at_or_above_the_working_folder_is_found(tmp_path):
    top = project(tmp_path / "mine")
    (top / "notes" / "deep").mkdir(parents=True)
    assert find_project_dir(cwd=top / "notes" / "deep", environ={}, home=tmp_path / "nowhere") == top.resolve()
    assert find_project_dir(cwd=top, environ={}, home=tmp_path / "nowhere") == top.resolve()


def test_a_pulumi_project_of_another_name_is_passed_over_for_the_checkout(tmp_path):
    other = project(tmp_path / "theirs", name="webapp")
    assert find_project_dir(cwd=other, environ={}, home=ROOT) == ROOT.resolve()


def test_the_flag_wins_over_the_env_var_which_wins_over_the_working_folder(tmp_path):
    a, b, c = project(tmp_path / "a"), project(tmp_path / "b"), project(tmp_path / "c")
    assert find_project_dir(str(a), cwd=c, environ={ENV_PROJECT_DIR: str(b)}) == a.resolve()
    assert find_project_dir(None, cwd=c, environ={ENV_PROJECT_DIR: str(b)}) == b.resolve()


def test_a_given_folder_that_is_no_project_is_refused_by_name(tmp_path):
    with pytest.raises(NoProject, match=r"--project-dir=.*no Pulumi.yaml of project 'eksbench' and no Pulumi.<stack>"):
        find_project_dir(str(tmp_path), cwd=tmp_path, environ={})
    with pytest.raises(NoProject, match=rf"\${ENV_PROJECT_DIR}="):
        find_project_dir(None, cwd=tmp_path, environ={ENV_PROJECT_DIR: str(tmp_path)})


def test_a_folder_of_stack_files_alone_may_be_named_but_is_never_found(tmp_path):
    (tmp_path / "Pulumi.mine.yaml").write_text("config: {}\n")
    assert find_project_dir(str(tmp_path), cwd=tmp_path, environ={}) == tmp_path.resolve()
    with pytest.raises(NoProject):
        find_project_dir(cwd=tmp_path, environ={}, home=tmp_path / "nowhere")


def test_no_project_anywhere_says_how_to_name_one(tmp_path):
    with pytest.raises(NoProject, match="pass --project-dir DIR or set"):
        find_project_dir(cwd=tmp_path, environ={}, home=tmp_path / "nowhere")


def cli(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})



# The version, and the commit where eksbench runs from a git checkout (bench.version).
VERSION = re.compile(re.escape(f"eksbench {__version__}") + r"( \(git [0-9a-f]{7,40}(-dirty)?\))?")

def test_version_is_printed(tmp_path):
    done = cli("--version", cwd=tmp_path)
    assert done.returncode == 0 and VERSION.fullmatch(done.stdout.strip()), done.stdout


def test_a_bad_project_dir_is_one_line_and_exit_2(tmp_path):
    done = cli("plan", "dev", "--project-dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: --project-dir=") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_local_results_default_to_the_projects_results_folder_from_a_sub_folder(tmp_path):
    """A dry run from a sub-folder of a project prints the results folder inside that project."""
    top = project(tmp_path / "proj")
    (top / "Pulumi.dev.yaml").write_text((ROOT / "Pulumi.dev.yaml").read_text())
    sub = top / "notebooks"
    sub.mkdir()
    done = cli("run", "dev", "--local", "--dry-run", cwd=sub)
    assert done.returncode == 0, done.stderr
    assert f"results: {top.resolve() / 'results' / 'dev'}/" in done.stdout


def test_pip_install_e_gives_the_eksbench_command_anywhere(tmp_path):
    """A fresh venv that sees the packages of the environment running the tests (a .pth file: the tests run in a
    venv themselves, whose packages ``system_site_packages`` would not show); ``pip install -e`` of the checkout
    (the build back end from the package index, as on a fresh machine), then ``eksbench`` from an unrelated folder."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    (site,) = env_dir.glob("lib/python*/site-packages")
    (site / "outer.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    pip = subprocess.run([env_dir / "bin" / "pip", "install", "-q", "--no-deps", "-e", str(ROOT)],
                         capture_output=True, text=True, timeout=600)
    if pip.returncode != 0 and "Could not find a version that satisfies the requirement setuptools" in pip.stderr:
        pytest.skip("no package index reachable for the build back end (setuptools)")
    assert pip.returncode == 0, pip.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", ENV_PROJECT_DIR)}
    exe = str(env_dir / "bin" / "eksbench")
    version = subprocess.run([exe, "--version"], cwd=elsewhere, capture_output=True, text=True, env=env, timeout=60)
    assert VERSION.fullmatch(version.stdout.strip()), version.stderr
    plan = subprocess.run([exe, "plan", "dev", "--json"], cwd=elsewhere, capture_output=True, text=True, env=env,
                          timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert '"stack": "dev"' in plan.stdout


def test_results_root_expands_home_and_refuses_an_empty_one_everywhere_it_is_set(tmp_path, monkeypatch, capsys):
    """Before: ``--results-root '~/eksres'`` wrote to ``<project>/~/eksres`` and ``--results-root ''`` to
    ``<project>/dev/...``."""
    import argparse
    import re

    from bench import automation
    from bench.cli import main, settle_paths
    from bench.results import load

    monkeypatch.setenv("HOME", str(tmp_path))
    args = argparse.Namespace(project_dir=str(ROOT), results_root="~/eksres")
    assert settle_paths(args) is None and args.results_root == str(tmp_path / "eksres")
    assert automation._results(ROOT, "~/x") == tmp_path / "x"
    for blank in ("", "   ", "\t"):
        for argv in (["status", "dev"], ["run", "dev", "--local", "--dry-run"], ["compare", "a", "b"],
                     ["report", "results/dev"]):
            assert main([*argv, "--results-root", blank]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert err == [f"error: --results-root={blank!r}: empty; give a folder, e.g. --results-root "
                           "~/eksbench-results, or leave it out for results/ in the project"], err
        for call in (lambda: automation.status("dev", results_root=blank),
                     lambda: load("dev", results_root=blank)):
            with pytest.raises(ValueError, match="^" + re.escape(f"results_root={blank!r}: empty; give a folder, "
                                                                 "e.g. results_root=~/eksbench-results")):
                call()
