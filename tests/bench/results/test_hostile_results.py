"""Hostile results: wrong shapes never stop a reader, and the report carries no markup but its own.

Every file under a results prefix was written by a pod running an image the user may not
have built. The property-based tests generate summary documents, metrics lines and text
fields and accept: readers that return (never raise), rows for every experiment, and a page
whose every element and attribute is one the report puts there.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import warnings
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.report import page as report
from bench.report.blocks import EMPTY_CLASS
from bench.results import frames as results
from bench.results import run_row
from bench.results import step_frame
from bench.results import readers as R
from tests.bench.conftest import ROOT, summary, write_experiment

pytestmark = pytest.mark.hostile  # the hostile-input group: pytest -m hostile

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=8)
FIELDS = st.sampled_from(sorted(R.SUMMARY) + ["coverage", "ended_at", "node_id"])
SUMMARIES = st.dictionaries(FIELDS, JSON, max_size=12) | JSON
HOSTILE_TEXT = st.sampled_from(['x" onmouseover="alert(1)', "'><script>alert(1)</script>", "</td></tr></table><img src=x>",
                                "javascript:alert(1)", "$\\frac{$", "<!--", "]]>", "&amp;", "\x00\x1b", "a" * 300]) \
    | st.text(max_size=20)
LINE_FIELDS = st.sampled_from(sorted(R.RANK_LINE))
LINES = st.lists(st.one_of(st.dictionaries(LINE_FIELDS, JSON, max_size=6).map(json.dumps), JSON.map(json.dumps),
                           st.text(max_size=20)), max_size=12).map("\n".join)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(w.message) for w in caught]


@settings(max_examples=300, deadline=None)
@given(doc=SUMMARIES, lines=LINES, eval_doc=JSON)
def test_no_reader_raises_and_every_kept_field_has_its_type(doc, lines, eval_doc):
    s, notes = _quiet(R.read_summary, json.dumps(doc), "exp/summary.json")
    assert len(notes) <= 1 and all(n.startswith("exp/summary.json: ") for n in notes)
    if s is not None:
        kept, bad = R.checked(s, R.SUMMARY)
        assert not bad, bad
    by_rank = {0: _quiet(R.read_rank_lines, lines, "exp/metrics/rank-0.jsonl")[0]}
    ev = _quiet(R.read_eval, json.dumps(eval_doc), "exp/eval/eval.json")[0]
    row = run_row.row(s, ids=("st", "r", "exp"), by_rank=by_rank, eval_doc=ev)
    for key in ("samples_per_s", "wall_s", "cost_usd", "accuracy", "step_time_p50_s", "mfu"):
        assert row[key] is None or (isinstance(row[key], (int, float)) and math.isfinite(row[key])), key
    assert step_frame.step_rows(by_rank, ("st", "r", "exp")) is not None
    for reader in (R.read_progress, R.read_eval):
        _quiet(reader, json.dumps(doc), "x.json")
    _quiet(R.read_event_lines, lines, "events.jsonl")
    _quiet(R.read_eval_lines, lines, "eval.jsonl")


# ---- the page: only the report's own elements and attributes ----------------------------------------------

ELEMENTS = {"html", "head", "meta", "title", "style", "script", "body", "main", "h1", "h2", "p", "div", "table", "tr",
            "th", "td", "img", "details", "summary", "pre", "ul", "li", "b", "span"}
ATTRIBUTES = {("html", "lang"), ("meta", "charset"), ("meta", "name"), ("meta", "content"), ("meta", "http-equiv"),
              ("td", "class"), ("tr", "class"), ("div", "class"), ("p", "class"), ("span", "class"), ("img", "class"),
              ("img", "alt"), ("img", "src")}
CLASSES = {"", "num", "error", "failed", "status-succeeded", "status-failed", "status-other", "scroll", "note",
           "meta", "estimate", "plot", "num status-succeeded", "num status-failed", "num status-other", "num error",
           EMPTY_CLASS}


class Markup(HTMLParser):
    """Every start tag with its attributes, and the text of every <script>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def assert_only_the_reports_markup(page: str) -> None:
    parsed = Markup()
    parsed.feed(page)
    parsed.close()
    for tag, attrs in parsed.tags:
        assert tag in ELEMENTS, f"element <{tag}> in the page"
        for name, value in attrs:
            assert (tag, name) in ATTRIBUTES, f"attribute {name}={value!r} on <{tag}>"
            if name == "class":
                assert value in CLASSES, f"class {value!r}"
            if name == "src":
                assert value.startswith("data:image/png;base64,"), value[:40]
    assert parsed.scripts == [report.LOADED_SCRIPT]


def _page(root: Path) -> tuple[str, list[str]]:
    df, notes = _quiet(results.load, str(root))
    steps, more = _quiet(results.steps, str(root))
    return report.build_html(df, steps, sources=[str(root)], notes=notes + more), notes + more


@pytest.fixture(scope="module")
def no_drawing():
    """Figures are made but not rendered to PNG (the slow part); their Text is checked by the mathtext test."""
    from bench.report import figures

    mp = pytest.MonkeyPatch()
    mp.setattr(figures, "png_data_uri", lambda fig, dpi=96: "data:image/png;base64,iVBORw0KGgo=")
    yield
    mp.undo()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(HOSTILE_TEXT, min_size=9, max_size=9), doc=SUMMARIES, lines=LINES)
def test_hostile_text_never_adds_markup_and_wrong_shapes_never_stop_the_page(no_drawing, texts, doc, lines):
    status, experiment, error, image, dev_key, dev_val, cmd, workload, run_id = texts
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "st"
        write_experiment(root, "r1/good", summary("good"))
        write_experiment(root, "r1/hostile", summary(experiment, status=status, error=error, image=image,
                                                     device={dev_key: dev_val}, command=[cmd],
                                                     config={"workload": workload, "batch_size": 8}))
        d = write_experiment(root, "r1/shapes", doc if isinstance(doc, dict) else json.dumps(doc), ranks=0)
        (d / "metrics" / "rank-0.jsonl").write_text(lines)
        page, _ = _page(root)
    assert_only_the_reports_markup(page)
    assert "good" in page


def test_a_status_cannot_add_an_attribute():
    """Before: the status went into ``class="status-{status}"`` as it was, so it could add a handler."""
    rows = [{"experiment": "a", "status": 'x" onmouseover="alert(1)', "error": "e"}]
    cells = report.table(rows, [("experiment", "e"), ("status", "s"), ("error", "x")])
    assert_only_the_reports_markup(cells + f"<script>{report.LOADED_SCRIPT}</script>")


def test_the_page_has_a_content_security_policy_naming_its_script_and_style_by_hash(tmp_path, no_drawing):
    write_experiment(tmp_path / "st", "r1/good", summary("good"))
    page, _ = _page(tmp_path / "st")
    policy = report.content_security_policy()
    assert "default-src 'none'" in policy and "img-src data:" in policy and "'unsafe-inline'" not in policy
    parsed = Markup()
    parsed.feed(page)
    metas = [dict(a) for t, a in parsed.tags if t == "meta" and dict(a).get("http-equiv") == "Content-Security-Policy"]
    assert [m["content"] for m in metas] == [policy]


def test_a_run_with_one_malformed_experiment_still_reports_the_others_with_one_warning(tmp_path):
    """Before: a string where the throughput object is stopped ``bench report`` with a traceback."""
    root = tmp_path / "results" / "st"
    write_experiment(root, "r1/ok-1", summary("ok-1", rate=1000.0))
    write_experiment(root, "r1/ok-2", summary("ok-2", rate=1900.0, nodes=2))
    write_experiment(root, "r1/bad", summary("bad", throughput="fast", config="resnet", wall_time_s="NaN"))
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "bench", "report", str(root), "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    warned = [ln for ln in done.stdout.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1, warned
    assert f"{root}/r1/bad/summary.json" in warned[0]
    assert all(f in warned[0] for f in ("throughput", "config", "wall_time_s"))
    page = out.read_text()
    assert ">ok-1<" in page and ">ok-2<" in page and ">bad<" in page


def test_a_folder_name_with_dollar_signs_is_drawn_as_text(tmp_path):
    """Before: matplotlib parsed "$\\frac{$" in an experiment's folder name as mathtext and the report stopped."""
    root = tmp_path / "st"
    write_experiment(root, "r1/plain", summary("plain"))
    write_experiment(root, "r1/$\\frac{$ x", summary("x"))
    out = report.write_report([str(root)], tmp_path / "r.html")
    assert "$\\frac{$ x" in out.read_text()


def test_a_symlinked_file_in_a_results_tree_is_not_read(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(summary("leaked")))
    root = tmp_path / "st"
    write_experiment(root, "r1/a", summary("a"))
    d = write_experiment(root, "r1/b", None)
    (d / "summary.json").symlink_to(secret)
    df, notes = _quiet(results.load, str(root))
    assert "leaked" not in set(df["experiment"]) and "leaked" not in str(df.to_dict())
    assert any("r1/b/summary.json: could not be read" in n and "symlink" in n for n in notes), notes


# ---- bounded work -------------------------------------------------------------------------------------------

def test_a_100_mb_metrics_file_and_a_million_line_log_are_read_in_bounded_pieces(tmp_path):
    root = tmp_path / "st"
    d = write_experiment(root, "r1/big", summary("big", status="failed", error=None), ranks=0)
    line = json.dumps({"step": 1, "loss": 0.5, "step_time_s": 0.1, "warmup": False, "restart": 0}) + "\n"
    with open(d / "metrics" / "rank-0.jsonl", "w") as f:
        f.write(line * (100 * 1024 * 1024 // len(line) + 1))
    (d / "logs").mkdir()
    with open(d / "logs" / "node-0.log", "w") as f:
        f.write("training step ok\n" * 1_000_000 + "RuntimeError: CUDA error: out of memory\n")
    steps, notes = _quiet(results.steps, str(root))
    assert len(steps) == R.MAX_LINES
    assert any("rank-0.jsonl: read only the first 200,000 line(s)" in n and "the rest was cut" in n for n in notes)
    df, _ = _quiet(results.load, str(root))
    assert "CUDA error: out of memory" in df.loc[0, "error"]


def test_ten_thousand_experiments_make_a_page_that_says_what_its_figures_left_out(tmp_path, no_drawing):
    root = tmp_path / "st"
    for i in range(10_000):
        d = root / "r1" / f"e{i:05d}"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(summary(f"e{i:05d}", rate=1000.0 + i)))
    page, notes = _page(root)
    assert_only_the_reports_markup(page)
    assert page.count("<details>") == 10_000
    assert "the bar charts show(s) the first 60 of 10000 experiment runs" in page
