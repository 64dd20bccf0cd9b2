"""The report's first section, from a run's timeline.json (bench/report/timeline.py, bench/report/timeline_plot.py)."""

from __future__ import annotations

import json
import warnings

from bench.report import timeline as RT
from bench.report.page import figure, table
from bench.results import timeline as T
from tests.bench.conftest import timeline_doc


def test_the_section_leads_with_the_figures_derived_from_the_marks(tmp_path):
    run = tmp_path / "gpu" / "r1"
    run.mkdir(parents=True)
    (run / "timeline.json").write_text(json.dumps(timeline_doc()))
    timelines = RT.load_timelines([str(tmp_path)])
    assert [label for label, _ in timelines] == ["stack gpu, run r1"]
    figs = timelines[0][1]["figures"]
    # the file's own "figures" (999) are not trusted: 400 s to the first step; 2 nodes x (900 s - 400 s stepping)
    assert figs["minutes_to_first_step"] == round(400 / 60, 2)
    assert figs["idle_gpu_node_minutes"] == round(2 * 500 / 60, 2)
    section = RT.timeline_section(timelines, table=table, figure=figure)
    assert section.startswith("<h2>Where the time went</h2>")
    assert f'<td class="">{400 / 60:.1f}</td>' in section and f"{2 * 500 / 60:.1f} (about $" in section
    assert "nothing left" in section and 'alt="timeline of each run"' in section


def test_a_hostile_timeline_is_escaped_or_dropped(tmp_path):
    run = tmp_path / "s" / "r"
    run.mkdir(parents=True)
    doc = timeline_doc(stack="<script>alert(1)</script>",
                       audit={"clean": False, "lines": ["<img src=x onerror=alert(1)>"]})
    doc["phases"].append({"name": "bad", "start_s": 5, "end_s": "soon"})  # the phases field is dropped, with a warning
    (run / "timeline.json").write_text(json.dumps(doc))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        timelines = RT.load_timelines([str(tmp_path)])
    assert any("phases" in str(w.message) for w in caught)
    label, got = timelines[0]
    assert got["phases"] == [] and got["figures"]["idle_gpu_node_minutes"] is None
    section = RT.timeline_section(timelines, table=table, figure=figure)
    assert "<script>" not in section and "<img src=x" not in section and "LEFTOVERS" in section


def test_no_timeline_says_where_one_comes_from(tmp_path):
    assert RT.load_timelines([str(tmp_path)]) == []
    assert "no timeline.json in these results (eksbench run on AWS writes one" in RT.timeline_section([], table=table, figure=figure)


def test_the_figure_draws_every_phase(tmp_path):
    from bench.report.timeline_plot import timeline_figure

    fig = timeline_figure([("stack gpu, run r1", timeline_doc())])
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:2] == [T.PREFLIGHT, T.UP] and "steps: resnet50-2n" in labels
    assert timeline_figure([]) is None
