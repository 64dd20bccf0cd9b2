"""bench.results.rank_lines: rank files streamed once, line by line, within limits counted as the lines are read; the
columns give the lines, warnings and figures the dicts gave, in a bounded memory."""

from __future__ import annotations

import json
import tracemalloc
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.results import files
from bench.results import frames as results
from bench.results import step_frame
from bench.results import rank_lines as L
from bench.results import readers as R
from bench.results.files import ExperimentFiles
from tests.bench.conftest import summary, write_experiment


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(w.message) for w in caught]


def in_memory(texts: dict[str, bytes], served: list[int] | None = None) -> ExperimentFiles:
    """An experiment folder of ``texts`` (relative path -> bytes); ``served`` collects the bytes each read gave."""
    def read(rel: str, start: int, length: int) -> bytes:
        data = texts[rel][start:] if start < 0 else texts[rel][start:start + length]
        data = data[:length]
        if served is not None:
            served.append(len(data))
        return data
    return ExperimentFiles(ids=("st", "r1", "e"), location="mem/e", files=set(texts), reader=read)


# ---- the reference: how the lines, as dicts, gave each figure before they were columns ----------------------------

def dict_steady_step_times(by_rank):
    slowest = {}
    for lines in by_rank.values():
        for r in lines:
            if not r.get("warmup") and isinstance(r.get("step_time_s"), (int, float)):
                key = (r.get("restart", 0), r.get("step", 0))
                slowest[key] = max(slowest.get(key, 0.0), r["step_time_s"])
    return [slowest[k] for k in sorted(slowest)]


def dict_step_samples(by_rank):
    per_step, samples, steps = {}, {}, {}
    for lines in by_rank.values():
        for r in lines:
            step, t = r.get("step"), r.get("step_time_s")
            if r.get("warmup") or not isinstance(step, int) or not isinstance(t, (int, float)):
                continue
            restart, n = r.get("restart", 0), max(int(r.get("steps", 1)), 1)
            times = r.get("step_times_s") or [t / n]
            for k, d in enumerate(times):
                key = (restart, step - len(times) + 1 + k)
                per_step[key] = max(per_step.get(key, 0.0), d)
            samples[(restart, step)] = samples.get((restart, step), 0.0) + (r.get("samples") or 0)
            steps[(restart, step)] = max(steps.get((restart, step), 0), n)
    total_steps = sum(steps.values())
    per = sum(samples.values()) / total_steps if total_steps and sum(samples.values()) else None
    return [per_step[k] for k in sorted(per_step) if per_step[k] > 0], per


SECONDS = st.floats(min_value=1e-6, max_value=10.0)
LINE = st.fixed_dictionaries({}, optional={
    "step": st.integers(-3, 40), "restart": st.integers(0, 2), "warmup": st.booleans(),
    "step_time_s": SECONDS | st.integers(1, 3), "samples": st.integers(0, 512), "steps": st.integers(-1, 4),
    "loss": st.floats(-5, 5) | st.integers(0, 3), "world_size": st.integers(1, 8), "wall_time": st.floats(0, 1e9),
    "samples_per_s": st.floats(0.5, 1e4), "step_times_s": st.lists(SECONDS, max_size=4)})
BY_RANK = st.dictionaries(st.integers(0, 5), st.lists(LINE, max_size=12), max_size=4)


@settings(max_examples=300, deadline=None)
@given(by_rank=BY_RANK)
def test_the_columns_give_the_figures_the_dicts_gave(by_rank):
    import pandas as pd

    lines = L.RankLines.of(by_rank)
    assert lines.steady_step_times.tolist() == dict_steady_step_times(by_rank)
    assert lines.step_samples() == dict_step_samples(by_rank)
    assert lines.world_sizes() == sorted({r["world_size"] for v in by_rank.values() for r in v if "world_size" in r})
    assert lines.most_restarts() == max((r.get("restart", 0) for v in by_rank.values() for r in v), default=0)
    assert {rank: [dict(x) for x in lines[rank]] for rank in lines} == by_rank
    # the step frame: the rows and dtypes pandas made of the lines as dicts
    rows = [{"stack": "st", "run_id": "r", "experiment": "e", "repeat": 1, "rank": rank,
             **{k: r.get(k) for k in results.STEP_COLUMNS[5:]}} for rank, v in sorted(by_rank.items()) for r in v]
    want = pd.DataFrame(rows, columns=list(results.STEP_COLUMNS))
    got = step_frame.step_frame([(("st", "r", "e"), 1, L.RankLines.of(dict(sorted(by_rank.items()))))])
    if rows:  # a number column no line has: float64 NaN (pandas made an object column of None)
        pd.testing.assert_frame_equal(got, want.astype({c: "float64" for c in want if want[c].isna().all()
                                                        and c != "warmup"}))
    else:
        assert got.empty and list(got.columns) == list(results.STEP_COLUMNS)


def text_read_lines(raw, name, schema, *, truncated=False, max_lines=200_000):
    """The reader of a whole text, as it was before the stream: the lines and the one warning."""
    text_ = raw.decode("utf-8", "replace")
    pieces = text_.split("\n", max_lines)
    cut = truncated or (len(pieces) > max_lines and bool(pieces[-1].strip()))
    lines = [ln for ln in pieces[:max_lines] if ln.strip()]
    out, malformed, bad = [], 0, []
    for i, line in enumerate(lines):
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict) and R.depth(doc) > R.MAX_DEPTH:
            doc = None
        if isinstance(doc, dict):
            kept, wrong = R.checked(doc, schema)
            out.append({k: v for k, v in kept.items() if v is not None})
            bad += wrong
        elif i < len(lines) - 1 or (len(lines) == 1 and not cut):
            malformed += 1
    problems = []
    if malformed:
        problems.append(f"skipped {malformed} malformed line(s)")
    if bad:
        problems.append(f"ignored field(s) of the wrong type in {len(bad)} place(s): {R._fields(bad)}")
    if cut:
        problems.append(f"read only the first {len(lines):,} line(s) (at most {max_lines:,} lines, "
                        f"{R.MAX_LINES_BYTES // 1024 // 1024} MiB); the rest was cut")
    return out, [f"{name}: " + "; ".join(problems)] if problems else []


TEXT_LINES = st.lists(st.one_of(LINE.map(json.dumps), st.text(max_size=12), st.just(""), st.just("{\"step\": \"x\"}"),
                                st.just("[1, 2]"), st.just("  ")), max_size=14).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXT_LINES, chunk=st.integers(1, 40), most=st.integers(1, 10), cut_at=st.none() | st.integers(0, 200))
def test_a_streamed_file_gives_the_lines_and_warning_the_whole_text_gave_whatever_its_pieces(text, chunk, most,
                                                                                              cut_at):
    raw = text.encode("utf-8", "surrogatepass")
    limit = len(raw) + 1 if cut_at is None else cut_at
    name = "mem/e/metrics/rank-0.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        for module, key, value in ((R, "MAX_LINES", most), (R, "MAX_LINES_BYTES", limit),
                                   (files, "CHUNK_BYTES", chunk)):
            mp.setattr(module, key, value)
        want, said = text_read_lines(raw[:limit], name, R.RANK_LINE, truncated=len(raw) > limit, max_lines=most)
        assert _quiet(R.read_lines, raw[:limit], name, R.RANK_LINE, truncated=len(raw) > limit,
                      max_lines=most) == (want, said)
        got, says = _quiet(L.read, in_memory({"metrics/rank-0.jsonl": raw}), L.Budget())
    assert [dict(x) for x in got.get(0, [])] == [{k: v for k, v in d.items() if k in R.RANK_LINE} for d in want]
    assert says == said


def test_a_line_past_its_byte_limit_is_skipped_unparsed_and_lines_may_span_pieces(monkeypatch):
    monkeypatch.setattr(R, "MAX_LINE_BYTES", 64)
    long = json.dumps({"step": 2, "step_times_s": [0.1] * 40})  # valid, but longer than a line may be
    raw = "\n".join([json.dumps({"step": 1}), long, json.dumps({"step": 3, "loss": 0.5}), "{"]).encode()
    for chunk in (5, 64, 1000):
        monkeypatch.setattr(files, "CHUNK_BYTES", chunk)
        got, said = _quiet(L.read, in_memory({"metrics/rank-0.jsonl": raw}), L.Budget())
        assert [dict(x) for x in got[0]] == [{"step": 1}, {"step": 3, "loss": 0.5}]
        assert said == ["mem/e/metrics/rank-0.jsonl: skipped 1 malformed line(s)"]  # the long one; "{" is last


def test_a_rank_file_is_read_no_further_than_its_line_limit(tmp_path, monkeypatch):
    """Before, each rank file was read whole (up to 64 MiB) and its lines were counted after; now reading stops at
    the limit: of a file of 100,000 lines with a limit of 1,000, about the first 1,000 lines' bytes are read."""
    monkeypatch.setattr(R, "MAX_LINES", 1_000)
    monkeypatch.setattr(files, "CHUNK_BYTES", 64 * 1024, raising=False)
    d = write_experiment(tmp_path / "st", "r1/e", summary("e"), ranks=0)
    line = json.dumps({"step": 1, "loss": 0.5, "step_time_s": 0.1, "warmup": False})
    (d / "metrics" / "rank-0.jsonl").write_text((line + "\n") * 100_000)
    served: list[int] = []
    real = files._read_local
    monkeypatch.setattr(files, "_read_local", lambda *a: served.append(len(data := real(*a))) or data)
    steps, said = _quiet(results.steps, str(tmp_path / "st"))
    assert len(steps) == 1_000
    assert any("rank-0.jsonl: read only the first 1,000 line(s)" in s for s in said), said
    assert sum(served) < 1_000 * (len(line) + 1) + 2 * 64 * 1024, f"read {sum(served):,} bytes"


def test_one_call_stops_at_its_budget_as_it_reads(tmp_path, monkeypatch):
    """``MAX_STEP_ROWS`` is counted line by line over the whole call: before, ``runs`` had no bound and ``steps``
    checked it only between experiment runs, so one run of many rank files passed it whole."""
    monkeypatch.setattr(R, "MAX_STEP_ROWS", 1_000)
    root = tmp_path / "st"
    write_experiment(root, "r1/a", summary("a"), ranks=3, steps=600)
    write_experiment(root, "r1/b", summary("b"), ranks=1, steps=5)
    got, said = _quiet(results.runs, str(root))
    assert [sum(len(v) for v in lines.values()) for _, lines in got] == [1_000, 0]
    assert [len(got[0][1][r]) for r in (0, 1)] == [600, 400] and 2 not in got[0][1]
    assert any(f"stopped in {root}/r1/a/metrics/rank-1.jsonl; the metrics of 1 later experiment run(s) were not read"
               in s for s in said), said
    steps, _ = _quiet(results.steps, str(root), max_rows=1_000)
    assert len(steps) == 1_000
    rows, said = _quiet(results.load, str(root))  # load keeps no lines: each run has a budget of its own
    assert [s.split("stopped in ")[1] for s in said if "stopped in" in s] == [f"{root}/r1/a/metrics/rank-1.jsonl"]
    assert list(rows["experiment"]) == ["a", "b"]


def test_memory_per_line_is_bounded_whatever_the_file_holds(tmp_path, monkeypatch):
    """What ``results.runs`` holds and peaks at per metrics line of a trainer's shape (10 step times), measured with
    tracemalloc: about 160 bytes kept and under 400 at the peak (the lines as dicts, read whole, took over 2 KB)."""
    monkeypatch.setattr(files, "CHUNK_BYTES", 256 * 1024, raising=False)
    n = 20_000
    d = write_experiment(tmp_path / "st", "r1/e", summary("e"), ranks=0)
    with open(d / "metrics" / "rank-0.jsonl", "w") as f:
        for i in range(1, n + 1):
            f.write(json.dumps({"step": 10 * i, "epoch": 0, "loss": 1 / i, "steps": 10, "samples": 320,
                                "step_time_s": 1.0 + i % 7 / 100, "samples_per_s": 300.0 + i % 5,
                                "step_times_s": [0.1 + k / 1000 for k in range(10)], "wall_time": 1.8e9 + i,
                                "world_size": 1, "rank": 0, "restart": 0, "warmup": i <= 10}) + "\n")
    results.runs(str(tmp_path / "st"))  # imports and caches out of the measure
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        got = results.runs(str(tmp_path / "st"))
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(len(v) for v in got[0][1].values()) == n
    assert (kept - before) / n < 250, f"{(kept - before) / n:.0f} bytes kept a line"
    assert (peak - before) / n < 400, f"{(peak - before) / n:.0f} bytes a line at the peak"


def test_a_rank_file_that_cannot_be_read_is_left_out_and_an_empty_one_is_an_empty_rank():
    def read(rel, start, length):
        if rel.endswith("rank-1.jsonl"):
            raise OSError("I/O error")
        return b""
    exp = ExperimentFiles(ids=("st", "r1", "e"), location="mem/e", reader=read,
                          files={"metrics/rank-0.jsonl", "metrics/rank-1.jsonl"})
    got, said = _quiet(L.read, exp, L.Budget())
    assert list(got) == [0] and len(got[0]) == 0
    assert said == ["mem/e/metrics/rank-1.jsonl: could not be read (OSError: I/O error)"]
    assert got.steady_quantile(0.5) is None and got.step_samples() == ([], None) and got.most_restarts() == 0


def test_the_harness_quantile_and_the_columns_round_alike():
    import numpy as np

    from workloads.train.harness.summary import quantile, sorted_quantile

    values = [0.1 + k / 997 for k in range(1_001)] + [3, 2]
    for q in (0.0, 0.5, 0.95, 1.0):
        assert sorted_quantile(np.sort(np.array(values, dtype=float)), q) == quantile(values, q)
    assert quantile([], 0.5) is None and sorted_quantile(np.array([]), 0.5) is None


def test_two_files_of_one_rank_are_read_as_one_the_first_by_name(tmp_path):
    """rank-01 beside rank-1: one rank, read from rank-01 (before, whichever the folder listed last)."""
    root = tmp_path / "st"
    d = write_experiment(root, "r1/e", summary("e"), ranks=2)
    Path(d / "metrics" / "rank-01.jsonl").write_text(json.dumps({"step": 99}) + "\n")
    (_, lines), = _quiet(results.runs, str(root))[0]
    assert sorted(lines) == [0, 1] and 99 in {x.get("step") for x in lines[1]}
