"""bench report: the HTML page (self-contained, every section), its errors, and how a real browser renders it."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
import sys

import pytest

from bench.report import page as report
from bench.results import frames as results
from bench.results import run_row
from tests.bench.conftest import ROOT

IMG = re.compile(r'<img class="plot" alt="([^"]*)" src="data:image/png;base64,([^"]+)"')


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "report", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def fabric_tree(tmp_path_factory):
    """gpu/r1/nccl-2n: an allreduce run on 2 x p4de whose NCCL fell back to sockets (as the launcher writes it)."""
    from tests.bench.conftest import summary, write_experiment
    from workloads.train.harness.fabric_check import busbw_summary, judge

    lines = [{"bytes": 2**k, "time_us": 2**k / 1e3 / min(2**k / 2**20, 9.0), "algbw_gbps": 0.0,
              "busbw_gbps": round(min(2**k / 2**20, 9.0) * 1.875, 4), "world_size": 16} for k in range(3, 31)]
    metrics = {"nccl_transport": "NET/Socket", "busbw": busbw_summary(lines, instance_type="p4de.24xlarge", nodes=2)}
    metrics.update(judge(metrics, {"EKSBENCH_EFA": "1"}, "pytorch")[0])
    root = tmp_path_factory.mktemp("fabric") / "results"
    write_experiment(root, "gpu/r1/nccl-2n", summary("nccl-2n", nodes=2, throughput={}, instance_type="p4de.24xlarge",
                                                     config={"workload": "allreduce"}, **metrics), ranks=0)
    return root / "gpu"


@pytest.fixture(scope="module")
def page(scaling_tree, fabric_tree, repeats_tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "report.html"
    done = run_cli(str(scaling_tree), str(fabric_tree), str(repeats_tree), "--out", str(out), "--baseline", "resnet50-1n")
    assert done.returncode == 0, done.stderr
    return out


def test_report_is_self_contained_and_has_every_section(page):
    from PIL import Image

    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), "the page must load nothing from the network"
    for heading in ("Where the time went", "Summary", "Throughput", "Scaling efficiency", "Repeats",
                    "Bus bandwidth (all-reduce)",
                    "Loss curves", "Step time distribution", "Time to accuracy", "Change between runs", "Cost",
                    "What ran"):
        assert f"<h2>{heading}" in text or f"<b>{heading}:</b>" in text, heading
    assert "<h2>Cost per result" in text
    images = IMG.findall(text)
    assert {alt for alt, _ in images} >= {"throughput per experiment", "scaling vs nodes", "loss curves",
                                          "step time per rank", "cost per run", "busbw per message size",
                                          "timeline of each run", "repeats with 95% intervals"}
    for alt, data in images:
        with Image.open(io.BytesIO(base64.b64decode(data))) as im:
            im.load()
            assert im.width > 300 and im.height > 100, alt


def test_report_numbers_scaling_baseline_cost_and_failures(page, scaling_tree):
    text = page.read_text()
    assert "× resnet50-1n" in text and "<td class=\"num\">3.4</td>" in text  # 3400 / 1000 samples/s
    assert ">0.95<" in text and ">0.85<" in text  # efficiency at 2 and 4 nodes
    # against the published anchor (DGX A100, mixed precision, 6.72 / 8 = 0.84), with its source
    assert ">0.84<" in text and ">1.131<" in text and "6.72x (84.0%)" in text and "DeepLearningExamples" in text
    assert ">1100<" in text and ">851.6<" in text and ">1348<" in text  # repeats 1000, 1100, 1200: mean, 95% CI
    assert "RuntimeError: NCCL timeout" in text and 'class="failed"' in text
    assert "(estimate)" in text and "p4d.24xlarge" in text
    assert "Restarts: resnet50-4n (1)." in text
    from bench.report.scaling_plot import scaling_table
    t = scaling_table(results.load(scaling_tree))
    assert t["efficiency"].tolist() == [1.0, 0.95, 0.85]


def test_report_flags_a_degraded_fabric_and_busbw_below_the_published_figure(page):
    text = page.read_text()
    # the synthetic curve tops out at 9 x 1.875 = 16.88 GB/s; 2 x p4de published 76.79 at 1 GiB (22%)
    assert "busbw below expected (16.88 of 76.79 GB/s at 1073741824 B); degraded (NCCL on sockets)" not in text
    assert "degraded (NCCL on sockets); busbw below expected (16.88 of 76.79 GB/s at 1073741824 B)" in text
    assert "<th>flags</th>" in text and "awsome-distributed-training" in text and ">0.2198<" in text


def test_single_size_says_so_and_cpu_cost_is_na(tmp_path, scaling_tree):
    out = tmp_path / "one.html"
    page = report.write_report([str(scaling_tree / "r1" / "resnet50-2n")], out)
    text = page.read_text()
    assert "<b>Scaling efficiency:</b> one size per workload only" in text
    from tests.bench.conftest import summary, write_experiment
    write_experiment(tmp_path, "dev/r1/cpu", summary("cpu", image=run_row.LOCAL_IMAGE, device=None,
                                                     instance_type=None))
    assert "<b>Cost:</b> none for local CPU runs" in report.write_report([str(tmp_path / "dev")], out).read_text()


def test_cli_errors_are_one_line_and_exit_2(tmp_path):
    missing = run_cli(str(tmp_path / "nothing-here"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no results at" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = run_cli(str(tmp_path / "empty"), "--out", str(tmp_path / "x.html"))
    assert empty.returncode == 2 and "nothing loadable" in empty.stderr and "Traceback" not in empty.stderr
    assert not (tmp_path / "x.html").exists()


def test_bad_baseline_is_a_usage_error(scaling_tree, tmp_path):
    done = run_cli(str(scaling_tree), "--out", str(tmp_path / "r.html"), "--baseline", "nope")
    assert done.returncode == 2 and "--baseline='nope'" in done.stderr and "resnet50-1n" in done.stderr


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (.ci/setup-tests installs it: apt-get install chromium)")
def test_page_renders_in_headless_chromium_with_every_figure_decoded(page, tmp_path):
    from PIL import Image, ImageStat

    png = tmp_path / "shot.png"
    shot = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p1'}", f"--screenshot={png}",
                           "--window-size=1280,2400", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert png.is_file(), shot.stderr[-2000:]
    with Image.open(png) as im:
        assert im.size == (1280, 2400)
        stddev = ImageStat.Stat(im.convert("L")).stddev[0]
        dark = sum(im.convert("L").histogram()[:128])
    assert stddev > 20 and dark > 2000, f"looks blank (stddev {stddev:.1f}, dark pixels {dark})"
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p2'}", "--virtual-time-budget=5000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    n = len(IMG.findall(page.read_text()))
    assert "busbw per message size" in {alt for alt, _ in IMG.findall(page.read_text())}
    loaded = re.search(r'data-images-loaded="(\d+)/(\d+)"', dom)
    assert loaded, "the page's load handler did not run"
    assert loaded.groups() == (str(n), str(n)), f"images decoded/total in the browser: {loaded.groups()}"
    assert "<h2>Repeats</h2>" in dom and 'alt="repeats with 95% intervals"' in dom and "anchor efficiency" in dom


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (.ci/setup-tests installs it: apt-get install chromium)")
def test_the_pages_policy_blocks_a_script_or_handler_that_got_into_it(page, tmp_path):
    """Were a value ever to slip past the escaping, the Content-Security-Policy still runs only the page's script."""
    text = page.read_text()
    planted = ("<script>document.body.setAttribute('data-planted','script')</script>"
               "<img src='data:image/png;base64,AA==' onerror=\"document.body.setAttribute('data-planted','handler')\">")
    hostile = tmp_path / "planted.html"
    hostile.write_text(text.replace("</main>", planted + "</main>"))
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p'}", "--virtual-time-budget=5000",
                          "--dump-dom", hostile.as_uri()], capture_output=True, text=True, timeout=120).stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert "data-images-loaded=" in body, "the page's own script must still run"
    assert "data-planted" not in body, f"a planted script or handler ran: {body}"


def test_a_hostile_busbw_document_gives_a_page_not_a_traceback(tmp_path):
    from tests.bench.conftest import summary, write_experiment

    hostile = {"curve": [{"bytes": 2**100, "busbw_gbps": 1.0}, {"bytes": "8", "busbw_gbps": 1.0}, {"bytes": True, "busbw_gbps": 2.0},
                         {"bytes": 16, "busbw_gbps": float("nan")}, *({"bytes": 2**k, "busbw_gbps": 1.0}
                                                                      for k in range(3, 200))],
               "peak_gbps": "<script>x</script>", "expected": {"compared_at_bytes": "1 GiB", "expected_gbps": 1.0}}
    write_experiment(tmp_path, "dev/r1/ar", summary("ar", throughput={}, busbw=hostile, flags=[1, None, "<b>"],
                                                    fabric="degraded"), ranks=0)
    text = report.write_report([str(tmp_path / "dev")], tmp_path / "h.html").read_text()
    assert "busbw per message size" in text and "<script>x" not in text and "&lt;b&gt;" in text


def test_the_loss_charts_log_axis_is_labelled_in_plain_numbers(tmp_path):
    """The page draws no mathtext (run text is drawn as it is): matplotlib's log formatters write
    ``$\\mathdefault{10^{0}}$``, which then showed as markup on the loss chart's axis."""
    import matplotlib

    from bench.report import figures, step_plots
    from tests.bench.conftest import summary, write_experiment

    root = tmp_path / "results"
    write_experiment(root, "gpu/r1/resnet", summary("resnet"))
    fig = step_plots.loss_figure(results.steps(str(root)), results.load(str(root)))
    with matplotlib.rc_context(figures.SAFE_TEXT):
        figures.png_data_uri(fig)  # draws it, so the tick labels exist
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True) if t.get_text()]
    assert labels and all("$" not in t and "mathdefault" not in t for t in labels), labels
    assert all(float(t) > 0 for t in labels)


def test_what_ran_shows_the_start_as_utc_text_and_an_unknown_start_blank(tmp_path):
    """``started_at`` is a datetime column (NaT where a run left no summary): the page says neither "NaT" nor a
    Timestamp's repr."""
    from tests.bench.conftest import summary, write_experiment

    write_experiment(tmp_path, "dev/r1/a", summary("a", started_at="2026-01-01T00:00:00Z"))
    write_experiment(tmp_path, "dev/r1/b", None, ranks=1)
    text = report.write_report([str(tmp_path / "dev")], tmp_path / "r.html").read_text()
    started = re.findall(r"<td class=\"\">started</td><td[^>]*>([^<]*)<", text)
    assert started == ["2026-01-01T00:00:00Z", "—"] and "NaT" not in text


def test_the_summary_shows_an_allreduces_peak_bus_bandwidth_in_a_column_of_its_own(fabric_tree, tmp_path):
    """The summary table gave an all-reduce run only dashes (it trains no samples); the column shows when one ran."""
    from tests.bench.conftest import summary, write_experiment

    write_experiment(tmp_path, "gpu/r1/resnet", summary("resnet"))
    shutil.copytree(fabric_tree / "r1" / "nccl-2n", tmp_path / "gpu" / "r1" / "nccl-2n")
    section = report.summary_section(results.load(str(tmp_path / "gpu")), None)
    head = re.findall(r"<th>([^<]*)</th>", section)
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", section)[1:]]
    by_name = {row[0]: dict(zip(head, row)) for row in cells}
    assert by_name["nccl-2n"]["peak busbw GB/s"] == "16.88" and by_name["resnet"]["peak busbw GB/s"] == "—"
    without = report.summary_section(results.load(str(tmp_path / "gpu" / "r1" / "resnet")), None)
    assert "peak busbw" not in without


def test_a_local_runs_page_collapses_each_section_with_nothing_to_show_to_one_line(real_run, tmp_path):
    """A local CPU run has no timeline, one size, no repeats, no all-reduce, one run and no price: each of those
    sections is one line saying why, and the sections with something to show keep their headings."""
    out = tmp_path / "local.html"
    done = run_cli(str(real_run), "--out", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    for title in ("Where the time went", "Scaling efficiency", "Repeats", "Bus bandwidth (all-reduce)",
                  "Time to accuracy", "Change between runs", "Cost"):
        assert text.count(f"<p class='empty'><b>{title}:</b>") == 1, title
        assert f"<h2>{title}" not in text, title
    for title in ("Summary", "Throughput", "Loss curves", "What ran"):
        assert f"<h2>{title}" in text, title
    assert "Cost per result" not in text


def test_an_input_bound_run_is_flagged_with_its_share_of_time_waiting_for_data(tmp_path):
    """A run whose steady steps waited for data half their time measures its input path: the summary says so."""
    from tests.bench.conftest import summary, write_experiment

    tp = {"samples_per_s_total": 1000.0, "samples_per_s_per_process": 125.0, "steady_seconds": 10.0}
    write_experiment(tmp_path, "gpu/r1/folder", summary("folder", throughput=tp, data_wait_s=5.0))
    write_experiment(tmp_path, "gpu/r1/synthetic", summary("synthetic", throughput=tp, data_wait_s=0.1))
    df = results.load(str(tmp_path / "gpu"))
    assert dict(zip(df["experiment"], df["data_wait_share"])) == {"folder": 0.5, "synthetic": 0.01}
    section = report.summary_section(df, None)
    assert "50% (input-bound)" in section and ">1%<" in section
    assert "Input-bound (1: folder): their steady steps waited for data 25% of the time or more" in section


def test_the_share_of_time_waiting_for_data_is_none_where_it_cannot_be_known():
    share = run_row.data_wait_share
    assert share(2.0, 8.0) == 0.25 and share(9.0, 8.0) == 1.0
    assert [share(*a) for a in ((None, 8.0), (2.0, None), (2.0, 0.0), (-1.0, 8.0), (True, 8.0), ("2", 8.0))] == \
        [None] * 6
