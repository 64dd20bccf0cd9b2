"""A Llama 3 run as results read it: the summary's ``language_model`` block as columns of ``results.load``, dollars
and energy per billion tokens derived from the price and the power the other columns use, nothing for any other
run, hostile blocks and negative energies read as missing with a warning, and the figures compare sets beside the
throughput."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from bench import results
from bench.results import compare, language_model, run_row
from core.catalog.aws import usd_per_hour
from core.catalog.llm import usd_per_billion_tokens
from tests.bench.conftest import FLOPS_8B, llama3_summary, summary, write_experiment

NEW_COLUMNS = ("tokens_per_s", "tokens_per_s_per_device", "flops_per_token", "mfu_fp8_peak", "final_loss",
               "final_val_loss", "target_loss", "tokens_to_target_loss", "time_to_target_loss_s", "model_size",
               "parameters", "seq_len", "tensor_parallel", "usd_per_billion_tokens", "joules_per_token",
               "kwh_per_billion_tokens")


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    """results/llm/r1/: 8B bf16 on 1 and 2 p5.48xlarge, 8B fp8 on 1, a ResNet-50 beside them. Read only."""
    root = tmp_path_factory.mktemp("llm") / "results"
    write_experiment(root, "llm/r1/llama8b-bf16-1n", llama3_summary("llama8b-bf16-1n"))
    write_experiment(root, "llm/r1/llama8b-bf16-2n", llama3_summary("llama8b-bf16-2n", nodes=2, tokens_per_gpu=5800.0))
    write_experiment(root, "llm/r1/llama8b-fp8-1n", llama3_summary("llama8b-fp8-1n", precision="fp8",
                                                                    tokens_per_gpu=8000.0))
    write_experiment(root, "llm/r1/resnet", summary("resnet"))
    return root / "llm"


def test_load_gives_a_language_models_figures_as_columns(llm):
    df = results.load(str(llm))
    assert set(NEW_COLUMNS) <= set(df.columns) and list(df.columns[:len(results.COLUMNS)]) == list(results.COLUMNS)
    df = df.set_index("experiment")
    r = df.loc["llama8b-bf16-1n"]
    assert (r["tokens_per_s"], r["tokens_per_s_per_device"], r["flops_per_token"]) == (48000.0, 6000.0, FLOPS_8B)
    assert (r["model_size"], r["parameters"], r["seq_len"], r["tensor_parallel"]) == ("8b", 8_030_261_248, 8192, 1)
    assert (r["final_loss"], r["final_val_loss"], r["target_loss"]) == (2.68, 2.71, 2.8)
    assert r["tokens_to_target_loss"] == 200 * 8 * 8192 and r["time_to_target_loss_s"] == pytest.approx(273.07, 1e-3)
    assert r["mfu"] == pytest.approx(0.351352) and math.isnan(r["mfu_fp8_peak"])
    assert [v["val_loss"] for v in r["val_losses"]] == [2.95, 2.71]
    fp8 = df.loc["llama8b-fp8-1n"]
    # the bf16 peak's (TorchTitan's and AWS's convention) and the fp8 peak's (NVIDIA's), each in its own column
    assert (fp8["mfu"], fp8["mfu_fp8_peak"]) == pytest.approx((8000 * FLOPS_8B / 989e12, 8000 * FLOPS_8B / 1979e12))
    resnet = df.loc["resnet"]
    assert all(resnet[c] is None or resnet[c] != resnet[c] for c in NEW_COLUMNS + ("val_losses",)), \
        "not a language model: NaN or None in every new column"
    assert resnet["samples_per_s"] == 1000.0 and resnet["mfu"] != resnet["mfu"]


def test_dtypes_of_the_new_columns(llm):
    df = results.load(str(llm))
    assert {str(df[c].dtype) for c in language_model.MEASURES} == {"float64"}
    assert {str(df[c].dtype) for c in language_model.COUNTS} == {"float64"}  # the ResNet row has none
    alone = results.load(str(llm / "r1" / "llama8b-bf16-1n"))
    assert {str(alone[c].dtype) for c in language_model.COUNTS} == {"int64"}


def test_dollars_per_billion_tokens_are_the_regions_on_demand_price_over_the_token_rate(llm):
    df = results.load(str(llm)).set_index("experiment")
    one, two = df.loc["llama8b-bf16-1n"], df.loc["llama8b-bf16-2n"]
    hourly = usd_per_hour("p5.48xlarge", "us-east-1")
    assert one["hourly_usd"] == hourly and two["hourly_usd"] == 2 * hourly
    assert one["usd_per_billion_tokens"] == pytest.approx(usd_per_billion_tokens(hourly, 48000.0), abs=1e-4)
    assert one["usd_per_billion_tokens"] == pytest.approx(hourly / 3600 / 48000 * 1e9, abs=1e-4)
    # usd_per_1k_samples is the same price over the same rate: a sample is a sequence of 8,192 tokens
    assert one["usd_per_billion_tokens"] == pytest.approx(one["usd_per_1k_samples"] / 1000 / 8192 * 1e9, rel=1e-5)
    assert two["usd_per_billion_tokens"] == pytest.approx(2 * hourly / 3600 / (5800 * 16) * 1e9, abs=1e-4)


def test_energy_per_token_is_the_mean_power_over_the_token_rate_as_energy_per_sample_is(llm):
    r = results.load(str(llm / "r1" / "llama8b-bf16-1n")).iloc[0]
    assert r["power_mean_w"] == 8 * 650.0
    assert r["joules_per_token"] == pytest.approx(5200 / 48000, abs=1e-9)
    assert r["kwh_per_billion_tokens"] == pytest.approx(5200 / 48000 * 1e9 / 3.6e6, abs=1e-6)
    assert r["joules_per_token"] * 8192 == pytest.approx(r["joules_per_sample"], rel=1e-5)


def test_a_run_without_telemetry_or_price_has_no_energy_or_dollars_per_token():
    doc = llama3_summary("x", power_w=None, what_ran={"region": "mars-west-1"})
    r = run_row.row(doc, ids=("s", "r", "x"))
    assert r["tokens_per_s"] == 48000.0 and r["usd_per_billion_tokens"] is None
    assert r["joules_per_token"] is None and r["kwh_per_billion_tokens"] is None
    local = run_row.row(llama3_summary("x", device={"name": "cpu"}, instance_type=None), ids=("s", "r", "x"))
    assert local["usd_per_billion_tokens"] is None and local["mfu"] is None


@pytest.mark.hostile
@pytest.mark.parametrize("energy", [-5200.0, float("-inf"), float("nan")])
def test_a_negative_or_non_finite_power_is_dropped_with_a_warning_never_a_negative_energy(energy):
    doc = llama3_summary("x")
    doc["telemetry"] = {"source": "nvml", "power_mean_w": energy, "energy_j": energy}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_row.row(doc, ids=("s", "r", "x"), location="results/llm/r1/x")
    assert [r[k] for k in ("energy_j", "kwh", "power_mean_w", "joules_per_sample", "joules_per_token",
                           "kwh_per_billion_tokens")] == [None] * 6
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].startswith("results/llm/r1/x: telemetry energy_j=")
    assert "read as missing" in said[0]


@pytest.mark.hostile
def test_a_summary_files_negative_energy_and_hostile_block_are_dropped_by_the_reader(tmp_path):
    doc = llama3_summary("x")
    doc["telemetry"]["power_mean_w"] = -1.0
    doc["language_model"].update(tokens_per_s=-48000.0, seq_len="long", model_size=["8b"], val_losses=[{"step": "a"}])
    write_experiment(tmp_path, "llm/r1/x", json.dumps(doc))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = results.load(str(tmp_path / "llm")).iloc[0]
    said = " ".join(str(w.message) for w in caught)
    for field in ("telemetry.power_mean_w", "language_model.tokens_per_s", "language_model.seq_len",
                  "language_model.model_size", "language_model.val_losses"):
        assert field in said, field
    assert r["joules_per_token"] != r["joules_per_token"] and r["tokens_per_s"] != r["tokens_per_s"]
    assert r["usd_per_billion_tokens"] != r["usd_per_billion_tokens"] and r["seq_len"] != r["seq_len"]
    assert r["tokens_per_s_per_device"] == 6000.0  # the rest of the block still counts


def test_compare_gives_each_sides_language_model_figures_and_none_for_other_runs(llm, tmp_path):
    write_experiment(tmp_path, "llm/b/llama8b-bf16-1n", llama3_summary("llama8b-bf16-1n", tokens_per_gpu=6600.0,
                                                                        val_losses=((100, 2.9), (200, 2.6))))
    a, b = results.runs(str(llm / "r1")), results.runs(str(tmp_path / "llm" / "b"))
    doc = compare.comparison(a, b, a="A", b="B")
    (e,) = doc["experiments"]
    lm = e["language_model"]
    assert lm["a"]["tokens_per_s_per_device"] == 6000.0 and lm["b"]["tokens_per_s_per_device"] == 6600.0
    assert lm["b"]["final_val_loss"] == 2.6 and lm["b"]["mfu"] == pytest.approx(6600 * FLOPS_8B / 989e12, abs=1e-6)
    assert lm["b"]["usd_per_billion_tokens"] < lm["a"]["usd_per_billion_tokens"]
    resnet = compare.comparison([r for r in a if r[0]["experiment"] == "resnet"],
                                [r for r in a if r[0]["experiment"] == "resnet"], a="A", b="A")
    assert resnet["experiments"][0]["language_model"] is None


def test_a_figure_no_run_can_have_is_dropped_with_a_warning():
    """Negative parameters, a negative MFU or data-wait share: what came back from a run is input too."""
    import warnings

    from bench.results.readers import read_summary

    doc = {"status": "succeeded", "language_model": {"parameters": -5, "mfu": -0.3, "data_wait_share": -1,
                                                      "seq_len": 0, "tokens_per_s": 10.0}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = read_summary(json.dumps(doc), "summary.json")
    assert kept["language_model"] == {"tokens_per_s": 10.0}
    assert any("language_model.parameters" in str(w.message) for w in caught)
