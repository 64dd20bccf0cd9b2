"""The report, given runs of several frameworks: one summary table with a framework column and one
throughput chart whose bars are coloured by framework, with a legend naming each."""

from __future__ import annotations

import re

from bench.report import page as report
from bench.report.bar_plots import throughput_figure
from bench.results import frames as results
from tests.bench.conftest import summary, write_experiment

FRAMEWORKS = {"pytorch": 1000.0, "tensorflow": 900.0, "horovod": 950.0, "paddle": 800.0}


def tree(tmp_path):
    root = tmp_path / "results"
    for framework, rate in FRAMEWORKS.items():
        write_experiment(root, f"fw/r1/{framework}-resnet50", summary(f"{framework}-resnet50", nodes=2, rate=rate,
                                                                      framework=framework))
    return root / "fw"


def test_one_table_with_a_framework_column(tmp_path):
    out = report.write_report([str(tree(tmp_path))], tmp_path / "report.html")
    text = out.read_text()
    summary_table = text.split("<h2>Summary</h2>", 1)[1].split("<h2>", 1)[0]
    header = re.findall(r"<th[^>]*>([^<]*)</th>", summary_table)
    assert header[:3] == ["experiment", "workload", "framework"]
    for framework in FRAMEWORKS:
        assert re.search(rf"<td[^>]*>{framework}-resnet50</td><td[^>]*>resnet50</td><td[^>]*>{framework}</td>",
                         summary_table), framework


def test_one_throughput_chart_coloured_by_framework(tmp_path):
    df = results.load(tree(tmp_path))
    fig = throughput_figure(df)
    legend = fig.axes[1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == list(df["framework"].drop_duplicates())
    assert set(t.get_text() for t in legend.get_texts()) == set(FRAMEWORKS)
    colours = {bar.get_facecolor() for bar in fig.axes[0].patches}
    assert len(colours) == len(FRAMEWORKS)  # one colour per framework, every run in the one chart
    assert len(fig.axes[0].patches) == len(FRAMEWORKS)


def test_a_single_framework_needs_no_legend(tmp_path):
    root = tmp_path / "results"
    write_experiment(root, "fw/r1/a", summary("a"))
    assert throughput_figure(results.load(root / "fw")).axes[1].get_legend() is None
