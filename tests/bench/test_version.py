"""``eksbench --version`` names the commit of a git checkout (``-dirty`` where tracked files changed), and the
version alone elsewhere; bare ``eksbench`` prints the help and exits 0, as ``pulumi`` does."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from bench import __version__
from tests.bench.conftest import ROOT


def git(root, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_checkout_names_its_commit_and_whether_it_has_changes(tmp_path):
    from bench.version import commit, version_text

    git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one")
    git(tmp_path, "add", "a.txt")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    git(tmp_path, "tag", "v9")  # a tag does not replace the hash
    head = git(tmp_path, "rev-parse", "--short", "HEAD")
    assert commit(tmp_path) == head and version_text(tmp_path) == f"eksbench {__version__} (git {head})"
    (tmp_path / "new.txt").write_text("untracked")
    assert commit(tmp_path) == head
    (tmp_path / "a.txt").write_text("two")
    assert version_text(tmp_path) == f"eksbench {__version__} (git {head}-dirty)"


def test_outside_a_checkout_the_version_alone(tmp_path):
    from bench.version import commit, version_text

    assert commit(tmp_path) is None and version_text(tmp_path) == f"eksbench {__version__}"


def test_the_command_prints_it_on_stdout():
    done = subprocess.run([sys.executable, "-m", "bench", "--version"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert re.fullmatch(rf"eksbench {re.escape(__version__)}( \(git [0-9a-f]{{7,}}(-dirty)?\))?\n", done.stdout)
    if (ROOT / ".git").exists() and shutil.which("git"):
        assert git(ROOT, "rev-parse", "--short", "HEAD") in done.stdout


def test_bare_eksbench_prints_the_help_and_exits_0():
    done = subprocess.run([sys.executable, "-m", "bench"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("usage: eksbench") and "examples:" in done.stdout and "COMMAND" in done.stdout
