"""The tests' own litter: what the processes they start leave in TMPDIR stays in the session's pytest folder
(tests/conftest.py session_tmpdir), which pytest removes after a green session (pytest.ini)."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import tempfile

from tests.test_import_graph import ROOT


def test_a_process_a_test_starts_makes_its_temporary_files_in_the_session_folder(session_tmpdir, tmp_path_factory):
    made = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp(prefix='torchelastic_'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert made.startswith(str(session_tmpdir) + "/")
    assert session_tmpdir.is_relative_to(tmp_path_factory.getbasetemp())
    assert tempfile.gettempdir() == str(session_tmpdir)  # and this process's own


def test_a_green_session_leaves_nothing_in_the_machines_temporary_folder(tmp_path):
    """A session of this project's pytest settings (pytest.ini, tests/conftest.py) whose test starts a process that
    leaves a folder, as torchrun leaves torchelastic_*: after it passes, the machine's TMPDIR holds only pytest's
    own (empty) per-user folder; after it fails, the failed test's folder is kept, to look at."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    shutil.copy(ROOT / "pytest.ini", project / "pytest.ini")
    shutil.copy(ROOT / "tests" / "conftest.py", project / "tests" / "conftest.py")
    (project / "tests" / "test_litter.py").write_text(
        "import os, subprocess, sys\n"
        "def test_litter(tmp_path):\n"
        "    (tmp_path / 'kept').write_text('')\n"
        "    subprocess.run([sys.executable, '-c', \"import tempfile; tempfile.mkdtemp(prefix='torchelastic_')\"],"
        " check=True)\n"
        "    assert not os.environ.get('FAIL')\n")
    machine = tmp_path / "machine-tmp"
    machine.mkdir()

    def session(**env: str) -> int:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                              env={**os.environ, "TMPDIR": str(machine), **env}, capture_output=True,
                              timeout=120).returncode

    assert session() == 0
    left = [p.relative_to(machine) for p in machine.rglob("*")]
    assert [p.name for p in left] == [f"pytest-of-{getpass.getuser()}"], left
    assert session(FAIL="1") == 1
    assert [p.name for p in machine.rglob("kept")] == ["kept"]  # the failed test's folder stays
