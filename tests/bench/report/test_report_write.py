"""Where ``bench report`` writes its page: a write that fails keeps the previous page whole and says so in one line
(exit 1); an ``--out`` that cannot take a file is refused before the page is built (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.report import page as report
from tests.bench.conftest import ROOT
from tests.support.closed_output import file_size_limit, limit_file_size


def run_cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "report", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, **kwargs)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_disk_that_fills_part_way_leaves_the_previous_page_whole(scaling_tree, tmp_path):
    """Before: ``OSError: [Errno 27] File too large`` with a traceback, exit 1, and the good page replaced by
    the part that fitted."""
    out = tmp_path / "report.html"
    assert run_cli(str(scaling_tree), "--out", str(out)).returncode == 0
    before = out.read_bytes()
    assert len(before) > 20_000
    done = run_cli(str(scaling_tree), "--out", str(out), preexec_fn=limit_file_size(len(before) // 3))
    assert done.returncode == 1, done.stderr
    line = one_line_error(done)
    assert str(out) in line and "File too large" in line and "unchanged" in line
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temporary file left beside it


def test_the_api_raises_one_oserror_naming_the_page_and_keeps_the_previous_one(scaling_tree, tmp_path):
    from bench.errors import NotWritten

    out = tmp_path / "report.html"
    out.write_text("the previous page")
    with file_size_limit(4096), pytest.raises(NotWritten) as caught:
        report.write_report([str(scaling_tree)], out)
    assert isinstance(caught.value, OSError) and str(out) in str(caught.value)
    assert out.read_text() == "the previous page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_an_out_that_cannot_take_a_file_is_refused_in_one_line_before_the_page_is_built(scaling_tree, tmp_path):
    """Before: an existing folder gave ``IsADirectoryError`` with a traceback (after the page was built)."""
    folder = tmp_path / "pages"
    folder.mkdir()
    (tmp_path / "a-file").write_text("x")
    cases = {str(folder): "is a folder", str(tmp_path / "missing" / "r.html"): "does not exist",
             str(tmp_path / "a-file" / "r.html"): "is not a folder", os.devnull: "not a regular file"}
    for out, why in cases.items():
        done = run_cli(str(scaling_tree), "--out", out)
        assert done.returncode == 2, (out, done.stderr)
        line = one_line_error(done)
        assert f"--out={out!r}" in line and why in line, line
    assert list(folder.iterdir()) == [] and not (tmp_path / "missing").exists()
