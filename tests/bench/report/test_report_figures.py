"""What the report's figures and sections say: the step-time plot in the table's unit, a local run's page without
empty sections, and the loss chart's tick labels as a browser shows them."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess

import pytest

from bench.report import page as report
from bench.report import figures, step_plots
from bench.results import frames as results
from bench.results import run_row
from tests.bench.conftest import summary
from tests.bench.report.test_report import CHROMIUM, FLAGS, IMG
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
    fig = step_plots.step_time_figure(steps, df)
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
    assert step_plots.per_step(s)["step_time_s"].tolist() == [0.5, 0.5, 2.0, 2.0]
    assert step_plots.per_step(s.drop(columns="steps"))["step_time_s"].tolist() == [1.5, 0.5, 2.0, 4.0]


def test_a_loss_within_one_decade_has_plain_tick_labels_in_its_view():
    """A loss from 2.25 to 1.8 holds no power of ten: the decades' labels (1, 10) fall outside the view, and
    the axis showed no number at all."""
    import matplotlib
    import pandas as pd

    for high, low, expected in ((2.25, 1.8, ["1.8", "1.9", "2", "2.1", "2.2"]), (0.05, 0.002, None),
                                (5.0, 0.003, ["0.01", "0.1", "1"])):
        steps = pd.DataFrame({"stack": "dev", "run_id": "r", "experiment": "e", "repeat": 1, "rank": 0,
                              "step": range(1, 31), "loss": [high - (high - low) * i / 29 for i in range(30)]})
        fig = step_plots.loss_figure(steps, pd.DataFrame({"stack": ["dev"], "run_id": ["r"], "experiment": ["e"],
                                                     "repeat": [1]}))
        with matplotlib.rc_context(figures.SAFE_TEXT):
            figures.png_data_uri(fig)
        ax = fig.axes[0]
        bottom, top = ax.get_ylim()
        shown = [t.get_text() for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True)
                 if t.get_text() and bottom <= t.get_position()[1] <= top]
        assert ax.get_yscale() == "log" and len(shown) >= 2 and all(float(t) > 0 for t in shown), (high, shown)
        assert expected is None or shown == expected, shown


def _pixels(png: bytes):
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"), dtype=np.int16)


def screenshot(page, tmp_path, height: int):
    """``page`` as headless Chromium draws it, 1400 px wide and ``height`` tall, unscaled: its pixels."""
    shot = tmp_path / "shot.png"
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p'}", f"--screenshot={shot}",
                           f"--window-size=1400,{height}", "--force-device-scale-factor=1", "--hide-scrollbars",
                           "--force-color-profile=srgb", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.is_file(), done.stderr[-2000:]
    return _pixels(shot.read_bytes())


def _find(screen, image) -> tuple[int, int]:
    """(x, y) of ``image`` drawn unscaled in ``screen``: its busiest row is searched for in each row of the screen."""
    import numpy as np

    row = int(np.argmax((image < 250).any(axis=2).sum(axis=1)))
    needle, width = image[row].astype(np.uint8).tobytes(), screen.shape[1] * 3
    for y in range(row, screen.shape[0] - image.shape[0] + row + 1):
        hay = screen[y].astype(np.uint8).tobytes()
        start = hay.find(needle)
        while start >= 0 and start % 3:
            start = hay.find(needle, start + 1)
        if start >= 0 and start + len(needle) <= width:
            return start // 3, y - row
    raise AssertionError("the loss chart is not drawn pixel for pixel anywhere on the page (scaled, or missing)")


def _label_bands(with_labels, without) -> list[tuple[int, int, int]]:
    """(top row, bottom row, ink width) of each tick label: the rows where the two renders differ, in runs."""
    import numpy as np

    ink = (with_labels != without).any(axis=2)
    rows = np.flatnonzero(ink.any(axis=1))
    bands, start = [], None
    for i, r in enumerate(rows):
        start = r if start is None else start
        if i + 1 == len(rows) or rows[i + 1] != r + 1:
            cols = np.flatnonzero(ink[start:r + 1].any(axis=0))
            bands.append((int(start), int(r), int(cols[-1] - cols[0] + 1)))
            start = None
    return bands


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (.ci/setup-tests installs it: apt-get install chromium)")
def test_the_browser_shows_the_loss_charts_tick_labels(tmp_path):
    """The report as Chromium draws it: the loss chart (a log axis whose loss, 2.25 to 1.8, holds no power of ten)
    is on screen pixel for pixel, unscaled, and its y axis carries separate plain-number labels: the pixels where
    the chart drawn with its tick labels differs from the same chart drawn with them transparent."""
    import matplotlib

    write_interval_run(tmp_path)
    page = report.write_report([str(tmp_path / "dev")], tmp_path / "report.html")
    (png,) = [base64.b64decode(data) for alt, data in IMG.findall(page.read_text()) if alt == "loss curves"]
    chart = _pixels(png)
    screen = screenshot(page, tmp_path, 3000)
    x, y = _find(screen, chart)
    on_screen = screen[y:y + chart.shape[0], x:x + chart.shape[1]]
    assert (on_screen == chart).all()

    fig = step_plots.loss_figure(results.steps(str(tmp_path / "dev")), results.load(str(tmp_path / "dev")))
    assert base64.b64decode(figures.png_data_uri(fig).split(",", 1)[1]) == png  # the page's chart, drawn again
    with matplotlib.rc_context(figures.SAFE_TEXT):
        fig.axes[0].tick_params(axis="y", which="both", labelcolor=(0, 0, 0, 0))
    bare = _pixels(base64.b64decode(figures.png_data_uri(fig).split(",", 1)[1]))
    labels = _label_bands(on_screen, bare)
    assert len(labels) >= 2, f"the browser shows {len(labels)} y tick label(s) on the loss chart"
    # plain numbers such as "1.8" are a few characters wide; markup such as $\mathdefault{10^{0}}$ is not
    assert all(4 <= height <= 16 and width <= 40 for top, bottom, width in labels for height in [bottom - top + 1]), \
        labels


def test_a_local_runs_page_opens_with_what_it_shows_and_ends_with_one_line_per_empty_section(tmp_path):
    """A local CPU run (no timeline, one size, no repeats, no all-reduce, an accuracy but no target, one run, no
    price): the page opens with its summary; each section with nothing to show is one line, together at the end;
    columns no run fills (instance, MFU) are left out."""
    from tests.bench.conftest import write_experiment

    for name, extra in (("cifar", {"accuracy": {"best_accuracy": 0.61, "target_accuracy": None,
                                                "time_to_accuracy_s": None}}), ("resnet", {})):
        write_experiment(tmp_path, f"dev/r1/{name}", summary(name, image=run_row.LOCAL_IMAGE, device=None,
                                                             instance_type=None, **extra))
    text = report.write_report([str(tmp_path / "dev")], tmp_path / "r.html").read_text()
    main = text[text.index("<main>"):]
    headings = re.findall(r"<h2>([^<]+)", main)
    assert headings[0] == "Summary" and headings[-1] == "Not in these results", headings
    assert main.index("<h2>Summary") < main.index("class='empty'")  # nothing empty before what the run shows
    assert not {"Time to accuracy", "Cost", "Repeats", "Where the time went"} & set(headings), headings
    empty = main[main.index("<h2>Not in these results</h2>"):]
    lines = re.findall(r"<p class='empty'><b>([^<]+):</b>", main)
    assert lines == re.findall(r"<p class='empty'><b>([^<]+):</b>", empty)  # all of them at the end
    assert set(lines) >= {"Where the time went", "Scaling efficiency", "Repeats", "Bus bandwidth (all-reduce)",
                          "Time to accuracy", "Change between runs", "Cost"}, lines
    assert "accuracy measured: cifar 0.610." in empty
    summary_table = main[:main.index("<h2>Throughput")]
    assert "<th>instance</th>" not in summary_table and "<th>MFU</th>" not in summary_table
    assert "<th>accuracy</th>" in summary_table


def test_the_accuracy_section_shows_the_energy_to_accuracy_where_a_run_measured_it(tmp_path):
    from tests.bench.conftest import write_experiment

    reached = {"best_accuracy": 0.93, "target_accuracy": 0.9, "time_to_accuracy_s": 1800.0}
    for name, energy in (("measured", 5.4e6), ("unmeasured", None)):
        write_experiment(tmp_path, f"dev/r1/{name}", summary(name, accuracy=reached, telemetry={
            "source": "nvml", "energy_j": 1e7, "energy_to_accuracy_j": energy}))
    section = report.accuracy_section(results.load(str(tmp_path / "dev")))
    assert section.count('<img class="plot"') == 2 and 'alt="energy to accuracy"' in section
    assert "evaluation that first reached the target" in section
    write_experiment(tmp_path, "dev/r1/measured", summary("measured", accuracy=reached))
    section = report.accuracy_section(results.load(str(tmp_path / "dev")))
    assert section.count('<img class="plot"') == 1 and "energy to accuracy" not in section.lower()
