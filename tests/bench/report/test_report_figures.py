"""What the report's figures and sections say: the step-time plot in the table's unit, a local run's page without
empty sections, and the loss chart's tick labels as a browser shows them."""

from __future__ import annotations

import json

import pytest

from bench.report import plots
from bench.results import frames as results
from tests.bench.conftest import summary
from workloads.train.harness.summary import throughput


def interval_lines(rank: int, *, per_step: float = 0.5, steps_per_line: int = 3, lines: int = 10) -> list[dict]:
    """Metrics lines as the trainers write them: one per interval of ``steps_per_line`` steps, each step
    ``per_step`` s (``step_time_s`` is the interval's time, ``step_times_s`` each step's)."""
    out = []
    for k in range(1, lines + 1):
        times = [per_step * (1 + 0.02 * ((k + i) % 3)) for i in range(steps_per_line)]
        out.append({"step": k * steps_per_line, "loss": 2.3 - 0.05 * k, "steps": steps_per_line,
                    "samples": 8 * steps_per_line, "step_time_s": round(sum(times), 6), "step_times_s": times,
                    "samples_per_s": 8 * steps_per_line / sum(times), "warmup": k == 1, "restart": 0,
                    "world_size": 2, "wall_time": 1_700_000_000 + k})
    return out


def write_interval_run(root, rel: str = "dev/r1/resnet") -> tuple:
    by_rank = {r: interval_lines(r) for r in range(2)}
    d = root / rel
    (d / "metrics").mkdir(parents=True)
    for r, lines in by_rank.items():
        (d / "metrics" / f"rank-{r}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    doc = summary("resnet", nodes=2, gpus=1)
    doc["throughput"] = throughput(by_rank)
    (d / "summary.json").write_text(json.dumps(doc))
    return d, doc["throughput"]


def test_the_step_time_plot_shows_time_per_step_as_the_tables_p50_counts_it(tmp_path):
    """Lines of 3 steps of about 0.5 s each: the plot shows about 0.5 s per step (not the 1.5 s interval), the
    unit of the summary's p50."""
    _, tp = write_interval_run(tmp_path)
    df, steps = results.load(str(tmp_path / "dev")), results.steps(str(tmp_path / "dev"))
    fig = plots.step_time_figure(steps, df)
    box_ax, line_ax = fig.axes
    assert box_ax.get_ylabel() == line_ax.get_ylabel() == "time per step (s)"
    drawn = [y for line in line_ax.get_lines() for y in line.get_ydata()]
    assert drawn and all(0.5 <= y <= 0.51 for y in drawn), drawn
    boxes = [float(y) for line in box_ax.get_lines() for y in line.get_ydata()]  # whiskers, caps, medians
    assert boxes and all(0.5 <= y <= 0.51 for y in boxes), boxes
    assert 0.5 <= tp["step_time_p50_s"] <= 0.51


def test_stragglers_are_judged_per_step_and_a_line_without_a_count_is_one_step():
    import pandas as pd

    s = pd.DataFrame({"step_time_s": [1.5, 0.5, 2.0, 4.0], "steps": [3, None, 0, 2]})
    assert plots.per_step(s)["step_time_s"].tolist() == [0.5, 0.5, 2.0, 2.0]
    assert plots.per_step(s.drop(columns="steps"))["step_time_s"].tolist() == [1.5, 0.5, 2.0, 4.0]
