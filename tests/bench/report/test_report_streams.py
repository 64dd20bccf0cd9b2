"""bench report on long runs: each rank file read once, figures that draw a bounded number of points, and statistics
of every line."""

from __future__ import annotations

import json
import warnings

import pytest

from bench.report import page as report
from bench.report import figures, step_plots
from bench.results import files
from bench.results import frames as results
from tests.bench.conftest import summary, write_experiment


def test_the_report_reads_each_rank_file_once(tmp_path, monkeypatch):
    """Before, ``runs`` read every rank file for the rows and ``steps`` read it all again for the figures."""
    root = tmp_path / "st"
    for name in ("a", "b"):
        write_experiment(root, f"r1/{name}", summary(name), ranks=3, steps=50)
    served: dict[str, int] = {}
    real = files._read_local

    def counted(base, key, start, length):
        data = real(base, key, start, length)
        served[key] = served.get(key, 0) + len(data)
        return data
    monkeypatch.setattr(files, "_read_local", counted)
    monkeypatch.setattr(figures, "png_data_uri", lambda fig, dpi=96: "data:image/png;base64,iVBORw0KGgo=")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report.write_report([str(root)], tmp_path / "r.html")
    ranks = {k: n for k, n in served.items() if "/metrics/rank-" in k}
    assert len(ranks) == 6
    for key, n in ranks.items():
        assert n == (root / key).stat().st_size, f"{key}: {n:,} bytes read of {(root / key).stat().st_size:,}"


def long_run(tmp_path, lines: int = 10_000):
    """One experiment run of 2 ranks x ``lines`` metrics lines; rank 1's step 5,000 took 9 s."""
    d = write_experiment(tmp_path / "st", "r1/long", summary("long"), ranks=0)
    for rank in range(2):
        with open(d / "metrics" / f"rank-{rank}.jsonl", "w") as f:
            for i in range(1, lines + 1):
                took = 9.0 if (rank, i) == (1, 5_000) else 0.1 + (i % 10) / 1000
                f.write(json.dumps({"step": i, "loss": 2.0 / i, "step_time_s": took, "samples_per_s": 32 / took,
                                    "wall_time": 1.8e9 + i, "world_size": 2, "restart": 0,
                                    "warmup": i <= 20}) + "\n")
    return tmp_path / "st"


def test_a_long_run_is_drawn_in_a_bounded_number_of_points_and_its_statistics_use_every_line(tmp_path):
    """Before, every logged step of every rank was a point (200,000 lines a rank drew as 200,000 points); now a line
    of more than MAX_POINTS steps draws each run of k steps as its slowest (a spike stays in sight), the loss
    curve each run's mean, and the box plot and the stragglers still take every step."""
    import numpy as np

    root = long_run(tmp_path)
    steps, df = results.steps(str(root)), results.load(str(root))
    fig = step_plots.step_time_figure(steps, df)
    box_ax, line_ax = fig.axes
    drawn = [line for line in line_ax.get_lines() if line.get_label().startswith("rank ")]
    assert [len(line.get_ydata()) for line in drawn] == [2_000] * 2 and figures.MAX_POINTS == 2_000
    assert max(drawn[1].get_ydata()) == 9.0 and "the slowest of 5 intervals" in line_ax.get_title()
    steady = steps[steps["warmup"] == False]  # noqa: E712
    medians = [float(np.median(steady[steady["rank"] == r]["step_time_s"])) for r in (0, 1)]
    # each box draws 7 lines: box, 2 whiskers, 2 caps, then its median
    assert [line.get_ydata()[0] for line in box_ax.get_lines()[5::7]] == pytest.approx(medians)
    loss = step_plots.loss_figure(steps, df).axes[0].get_lines()[0]
    assert len(loss.get_ydata()) == 2_000 and "5 steps a point" in loss.get_label()
    assert loss.get_ydata()[0] == pytest.approx(np.mean([2.0 / i for i in range(1, 6)]))


def test_drawing_keeps_what_a_short_run_showed():
    """Runs of a few hundred steps are drawn as before: a point per logged step, one span of warm-up."""
    assert step_plots.spans([0, 1, 2, 7, 9, 10]) == [(0, 2), (7, 7), (9, 10)]
    at, y, k = figures.thinned([0.3, 0.1, 0.2], __import__("numpy").maximum)
    assert (list(at), list(y), k) == ([0, 1, 2], [0.3, 0.1, 0.2], 1)


def frame_stragglers(steps):
    """The stragglers as they were found before, grouping by the four text columns."""
    out = []
    steady = steps[steps["warmup"] == False].dropna(subset=["step_time_s"])  # noqa: E712
    several = steady.groupby(["stack", "run_id", "experiment"])["repeat"].nunique().to_dict()
    for (stack, run_id, exp, repeat), g in steady.groupby(["stack", "run_id", "experiment", "repeat"]):
        med = g.groupby("rank")["step_time_s"].median()
        typical = med.median()
        name = f"{exp} #{int(repeat)}" if several.get((stack, run_id, exp), 1) > 1 else exp
        for rank, m in med.items():
            if typical and m > step_plots.STRAGGLER * typical:
                out.append({"stack": stack, "run_id": run_id, "experiment": name, "rank": int(rank),
                            "median_step_s": round(m, 4), "ratio": round(m / typical, 2)})
    return out


def test_stragglers_by_run_number_are_the_stragglers_by_name():
    import random

    import pandas as pd

    rng = random.Random(7)
    for _ in range(200):
        rows = [{"stack": rng.choice(["s", "t", None]), "run_id": rng.choice(["r1", "r2"]), "rank": rng.randint(0, 3),
                 "experiment": rng.choice(["a", "b"]), "repeat": rng.randint(1, 2),
                 "warmup": rng.choice([True, False, None]), "step_time_s": rng.choice([None, rng.random(), 5.0])}
                for _ in range(rng.randint(0, 60))]
        steps = pd.DataFrame(rows, columns=list(results.STEP_COLUMNS))
        assert step_plots.stragglers(steps) == frame_stragglers(steps)
