"""The report's language-model section: each Llama 3 run's figures, each beside its nearest published figure as a
ratio with source and caveats, the loss curves (seen in headless Chromium), a node sweep's scaling efficiency beside
the published series', and one line for a page without a language model."""

from __future__ import annotations

import base64
import html
import re

import pytest

from bench import results
from bench.report import language_model as section
from bench.report import page as report
from bench.report.language_model_plot import anchor_scaling, loss_figure, scaling_table
from tests.bench.conftest import llama3_summary, summary, write_experiment
from tests.bench.report.test_report import CHROMIUM, IMG
from tests.bench.report.test_report_figures import _find, _pixels, screenshot


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    """results/llm/r1/: 8B bf16 at 1, 2 and 4 nodes of p5.48xlarge, 8B fp8 on 1, a ResNet-50 beside. Read only."""
    root = tmp_path_factory.mktemp("llm") / "results"
    for nodes, rate in ((1, 6000.0), (2, 5800.0), (4, 5500.0)):
        write_experiment(root, f"llm/r1/llama8b-bf16-{nodes}n",
                         llama3_summary(f"llama8b-bf16-{nodes}n", nodes=nodes, tokens_per_gpu=rate))
    write_experiment(root, "llm/r1/llama8b-fp8-1n", llama3_summary("llama8b-fp8-1n", precision="fp8",
                                                                    tokens_per_gpu=8000.0))
    write_experiment(root, "llm/r1/resnet", summary("resnet"))
    return root / "llm"


@pytest.fixture(scope="module")
def page_text(llm, tmp_path_factory):
    return report.write_report([str(llm)], tmp_path_factory.mktemp("out") / "r.html").read_text()


def _section(text: str) -> str:
    start = text.index("<h2>Language model</h2>")
    return text[start:text.index("<h2>", start + 5)]


def _cells(part: str) -> list[list[str]]:
    return [[html.unescape(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", part)]


def test_each_run_shows_tokens_per_gpu_mfu_in_both_conventions_cost_and_energy_per_billion_tokens(page_text):
    text = _section(page_text)
    assert text.index("<h2>Language model</h2>") == 0 and page_text.index("<h2>Throughput") < page_text.index(
        "<h2>Language model")
    runs = _cells(text[:text.index("<h3>")])
    head, rows = runs[0], {r[0]: dict(zip(runs[0], r)) for r in runs[1:]}
    assert head[:6] == ["experiment", "model", "GPUs", "precision", "tokens/s per GPU", "MFU"]
    assert set(rows) == {"llama8b-bf16-1n", "llama8b-bf16-2n", "llama8b-bf16-4n", "llama8b-fp8-1n"}  # not resnet
    one = rows["llama8b-bf16-1n"]
    assert (one["model"], one["GPUs"], one["precision"], one["tokens/s per GPU"], one["MFU"]) == (
        "8B (8.03 B parameters), seq 8,192", "8 × H100", "bf16", "6000", "35.1%")
    assert (one["TFLOP/s per GPU"], one["step p50 s"], one["waiting for data"], one["peak memory GiB"]) == (
        "347.5", "1.365", "1%", "61.5")
    assert (one["USD per billion tokens (estimate)"], one["kWh per billion tokens"], one["last val loss"]) == (
        "318.5", "30.09", "2.71")
    assert one["to target loss"] == "2.8: 0.0131 B tokens, 273 s"
    fp8 = rows["llama8b-fp8-1n"]
    assert fp8["MFU"] == "46.8% (bf16 peak) / 23.4% (fp8 peak)" and fp8["precision"] == "fp8 (tensorwise)"


def test_each_run_stands_beside_its_nearest_published_figure_with_the_ratio_source_and_caveats(page_text):
    text = _section(page_text)
    part = text[text.index("<h3>Beside the published figures"):text.index("<h3>Loss")]
    table = _cells(part)
    rows = {r[0]: dict(zip(table[0], r)) for r in table[1:]}
    one = rows["llama8b-bf16-1n"]
    assert one["nearest published figure"] == "TorchTitan 8B bf16 compiled 6,667 tokens/s/GPU on 8 H100"
    assert (one["its tokens/s per GPU"], one["× anchor (tokens/s per GPU)"], one["× anchor (MFU)"]) == (
        "6667", "0.9", "0.9")
    assert one["source"] == "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @ b5bcd76"
    assert "H100 96 GB HBM2e at the default 500 W" in one["caveats"] and "this run on" not in one["caveats"]
    assert "measured on 8 GPUs, this run on 32" in rows["llama8b-bf16-4n"]["caveats"]
    fp8 = rows["llama8b-fp8-1n"]
    assert fp8["nearest published figure"].startswith("TorchTitan 8B fp8 compiled 8,532")
    assert fp8["our MFU (its convention)"] == "46.8% (bf16 peak)" and fp8["× anchor (tokens/s per GPU)"] == "0.938"


def test_a_runs_anchor_notes_another_sequence_length_and_a_gpu_with_none_published(llm):
    df = results.load(str(llm / "r1" / "llama8b-bf16-1n"))
    row = section._records(df)[0]
    short = dict(row, seq_len=2048, tokens_per_s_per_device=20000.0, mfu=0.3)
    got = section.anchor_row(short, "short")
    assert "sequence length 8,192, this run's 2,048" in got["caveats"]
    assert got["vs_tokens"] == 3.0 and got["vs_mfu"] == pytest.approx(0.3 / 0.39, abs=0.01)  # MFU allows for it
    h200 = section.anchor_row(dict(row, instance_type="p5e.48xlarge", gpu="NVIDIA H200"), "h200")
    assert h200 == {"experiment": "h200", "anchor": "none published for 8B on H200 in bf16"}
    eager = section.anchor_row(dict(row, config={"compile": False}, world_size=32, nodes=4), "eager")
    assert eager["anchor"] == "AWS p5 8B bf16 6,785 tokens/s/GPU on 32 H100" and "(published 39.7%)" in eager[
        "anchor_mfu"]


def test_the_loss_figure_draws_training_loss_by_step_and_validation_loss_by_tokens(llm, page_text):
    alts = [alt for alt, _ in IMG.findall(_section(page_text))]
    assert alts == ["language model loss curves", "language model scaling efficiency"]
    df = results.load(str(llm))
    fig = loss_figure(results.steps(str(llm)), df)
    left, right = fig.axes
    assert len(left.lines) == 4 and list(left.lines[0].get_xdata()) == list(range(1, 9))  # the LM runs' lines only
    tokens = right.lines[0].get_xdata()
    # millions here (6.6 M and 13.1 M tokens): the axis takes the scale of what was trained
    assert list(tokens) == pytest.approx([100 * 8 * 8192 / 1e6, 200 * 8 * 8192 / 1e6])
    assert right.get_xlabel() == "million tokens trained"
    assert "target 2.8" in [t.get_text() for t in right.get_legend().get_texts()]
    assert loss_figure(results.steps(str(llm / "r1" / "resnet")), results.load(str(llm / "r1" / "resnet"))) is None


def test_a_node_sweep_shows_its_scaling_efficiency_beside_the_published_series(llm, page_text):
    df = results.load(str(llm))
    ours = scaling_table(df)
    assert ours[["nodes", "gpus", "tokens_per_gpu", "efficiency"]].values.tolist() == [
        [1, 8, 6000, 1.0], [2, 16, 5800, 0.967], [4, 32, 5500, 0.917]]
    assert set(ours["group"]) == {"8B bf16 on H100"}  # the fp8 run is one size: no sweep
    theirs = anchor_scaling(ours)
    dgxc = theirs[theirs["series"].str.startswith("NVIDIA")]
    assert dgxc["gpus"].tolist() == [8, 16, 32, 64, 128] and dgxc["efficiency"].iloc[-1] == 0.972
    assert not theirs["series"].str.startswith("AWS").any()  # one GPU count: no series
    text = _section(page_text)
    assert "<h3>Scaling efficiency in tokens</h3>" in text and "8B bf16 on H100" in text and "0.917" in text


def test_a_page_without_a_language_model_says_so_in_one_line(tmp_path):
    write_experiment(tmp_path, "dev/r1/resnet", summary("resnet"))
    text = report.write_report([str(tmp_path / "dev")], tmp_path / "r.html").read_text()
    assert "<h2>Language model" not in text
    assert "<p class='empty'><b>Language model:</b> no run trained a language model (workload: llama3)" in text


@pytest.mark.hostile
def test_text_from_a_run_in_the_section_is_escaped_on_the_page_and_in_the_figures(tmp_path):
    for nodes in (1, 2):
        doc = llama3_summary(f"x-{nodes}n", nodes=nodes)
        doc["language_model"].update(model_size="<img src=x>\x1b[31m\u202e", fp8_recipe="<b>r</b>")
        write_experiment(tmp_path, f"llm/r1/x-{nodes}n", doc)
    text = report.write_report([str(tmp_path / "llm")], tmp_path / "r.html").read_text()
    part = _section(text)
    assert "<img src=x>" not in part and "<b>r</b>" not in part and "\x1b" not in part and "\u202e" not in part
    assert "&lt;IMG SRC=X&gt;\\x1b[31M\\u202e (8.03 B parameters)" in part and "&lt;b&gt;r&lt;/b&gt;" in part
    ours = scaling_table(results.load(str(tmp_path / "llm")))
    assert ours["group"].iloc[0] == "<IMG SRC=X>\\x1b[31M\\u202e bf16 on H100"  # as the labels are: safe_line


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (.ci/setup-tests installs it: apt-get install chromium)")
def test_the_browser_shows_the_language_models_loss_figure(llm, tmp_path):
    """Chromium draws the loss figure pixel for pixel, unscaled."""
    page = report.write_report([str(llm)], tmp_path / "report.html")
    (png,) = [base64.b64decode(data) for alt, data in IMG.findall(page.read_text())
              if alt == "language model loss curves"]
    chart, screen = _pixels(png), screenshot(page, tmp_path, 4000)
    x, y = _find(screen, chart)
    assert (screen[y:y + chart.shape[0], x:x + chart.shape[1]] == chart).all()


def test_a_models_parameters_read_at_its_own_scale():
    from bench.report.language_model import parameters_text

    assert [parameters_text(n) for n in (8_030_261_248, 1_235_814_400, 6_163_712, 435_072, 12)] == [
        "8.03 B", "1.24 B", "6.16 M", "435 K", "12"]
