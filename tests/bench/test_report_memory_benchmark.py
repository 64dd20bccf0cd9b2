"""bench.benchmarks.report_memory measures at the readers' limits: its rank files hold MAX_LINES lines within
MAX_LINES_BYTES, so none is cut and the largest input is MAX_STEP_ROWS lines and MAX_STEP_TIMES step times."""

from __future__ import annotations

import json

from bench.benchmarks import report_memory as B
from bench.results import readers as R


def test_the_benchmarks_rank_files_fit_the_readers_limits_whole():
    text = B.rank_text(rank=24, lines=R.MAX_LINES, world=25, seed=0)  # the largest rank number: the longest lines
    lines = text.splitlines()
    assert len(lines) == R.MAX_LINES and len(text.encode()) <= R.MAX_LINES_BYTES
    assert all(len(line) <= R.MAX_LINE_BYTES for line in lines[:100])
    files = R.MAX_STEP_ROWS // R.MAX_LINES
    assert files * R.MAX_LINES == R.MAX_STEP_ROWS
    assert files * R.MAX_LINES * len(json.loads(lines[-1])["step_times_s"]) == R.MAX_STEP_TIMES


def test_the_benchmarks_telemetry_files_fit_the_readers_limits_whole(tmp_path):
    """``report_memory telemetry`` reaches the row limit through files the readers keep whole: its longest line of
    empty GPU entries within MAX_LINE_BYTES, no file past MAX_LINES or MAX_LINES_BYTES."""
    from bench.results.hardware import MAX_TELEMETRY_ROWS

    for shape, rows in (("empty", 2 * (R.MAX_LINE_BYTES // 3)), ("full", 1_000)):
        stack = B.build_telemetry(tmp_path / shape, shape, rows=rows)
        files = sorted(stack.rglob("*.jsonl"))
        lines = [line for f in files for line in f.read_text().splitlines()]
        assert sum(len(json.loads(line)["gpus"]) for line in lines) == rows
        assert max(len(line) + 1 for line in lines) <= R.MAX_LINE_BYTES
        assert all(f.stat().st_size <= R.MAX_LINES_BYTES and len(f.read_text().splitlines()) <= R.MAX_LINES
                   for f in files)
    assert B.build_telemetry.__defaults__ == (MAX_TELEMETRY_ROWS + 1,)
