"""The tests' own litter: what the processes they start leave in TMPDIR stays in the session's pytest folder
(tests/conftest.py session_tmpdir), which pytest removes after a green session (pytest.ini)."""

from __future__ import annotations

import configparser
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


def test_a_green_sessions_folders_are_removed():
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    assert ini["pytest"]["tmp_path_retention_policy"] == "failed"
