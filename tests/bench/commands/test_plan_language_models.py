"""The plan of a language-model stack (llama3) says, per experiment, the model's parameters and FLOPs per token, one
GPU's memory estimate against the GPU's, and tokens/s per GPU and the cost of a billion tokens from the nearest
published figure of the same GPU, named; or that there is none (program.language_model_estimate)."""

from __future__ import annotations

import copy
import json

import pytest

from bench.cli import main
from bench.commands.plan import render
from program.offline import evaluate_config
from tests.bench.commands.test_plan_prices import project
from tests.program.test_program import P5_FILLED

EIGHT_B = {"workload": "llama3", "model_size": "8b", "batch_size": 1, "precision": "bf16", "steps": 50}


def llm_stack(instance_type: str = "p5.48xlarge") -> dict:
    """The p5 example (us-east-1) with 4 nodes of ``instance_type`` and three llama3 experiments: 8B bf16 eager on all
    4 nodes, the same compiled (a language model's GPU default), and 8B fp8 on 1."""
    config = copy.deepcopy(P5_FILLED)
    group = config["eksbench:gpu_node_groups"][0]
    group.update(instance_type=instance_type, max_size=4, desired_size=4)
    config["eksbench:experiments"] = [{**EIGHT_B, "name": "llama8b", "nodes": 4, "compile": False},
                                      {**EIGHT_B, "name": "llama8b-compiled", "nodes": 4},
                                      {**EIGHT_B, "name": "llama8b-fp8", "precision": "fp8", "nodes": 1}]
    return config


@pytest.fixture(scope="module")
def p5_plan():
    return evaluate_config("llm", llm_stack())


def test_a_p5_plan_names_the_aws_figure_and_prices_a_billion_tokens(p5_plan):
    rows = {r["experiment"]: r for r in p5_plan.estimate["language_models"]}
    eight = rows["llama8b"]
    assert (eight["parameters"], eight["flops_per_token"]) == (8_030_261_248, 57_914_449_920)
    assert eight["memory_fits"] is True and eight["memory_per_gpu_bytes"] < eight["gpu_memory_bytes"] == 80 * 2**30
    assert eight["tokens_per_s_per_gpu_estimate"] == 6785
    # 4 x p5.48xlarge at us-east-1's $55.04/h over 32 x 6,785 tokens/s
    assert eight["usd_per_billion_tokens_estimate"] == pytest.approx(4 * 55.04 / 3600 / (32 * 6785) * 1e9, rel=1e-3)
    assert eight["estimate_note"] == "from AWS p5 8B bf16 6,785 tokens/s/GPU on 32 H100"
    assert eight["anchor"]["source"].startswith("aws-samples/awsome-distributed-training 3.test_cases/pytorch/")
    text = render(p5_plan)
    assert "\nLanguage models (memory: an estimate, core/catalog/llm_memory.py;" in text
    assert ("  llama8b: Llama 3 8B, 8,030,261,248 parameters, 57.91 GFLOP per token at seq 8,192, bf16 on 4 x "
            "p5.48xlarge (32 H100)") in text
    assert "memory per GPU: 39.4 GiB of 80 GiB (activations 24.6, logits 5.9, state 3.7," in text
    assert ("~6,785 tokens/s/GPU, ~$282 per billion tokens at us-east-1 on-demand prices (from AWS p5 8B bf16 6,785 "
            "tokens/s/GPU on 32 H100)") in text
    # compiled, as a language model is by default on a GPU: a compiled figure, which says so (AWS's is eager)
    assert rows["llama8b-compiled"]["estimate_note"] == "from TorchTitan 8B bf16 compiled 6,667 tokens/s/GPU on 8 H100"
    assert "(from TorchTitan 8B fp8 compiled 8,532 tokens/s/GPU on 8 H100)" in text


def test_a_gpu_with_no_published_figure_says_so_and_takes_no_other_gpus():
    """An H200 (p5e) has the H100's compute but none of its published figures stand in."""
    plan = evaluate_config("llm", {**llm_stack("p5e.48xlarge"), "eksbench:experiments": [
        {**EIGHT_B, "name": "llama8b", "nodes": 2}]})
    (row,) = plan.estimate["language_models"]
    assert row["tokens_per_s_per_gpu_estimate"] is None and row["usd_per_billion_tokens_estimate"] is None
    assert row["estimate_note"] == "no published figure for H200 in 8B bf16"
    assert "memory per GPU: " in render(plan) and "of 141 GiB" in row["memory_text"]
    assert "tokens/s: no published figure for H200 in 8B bf16" in render(plan)


def test_an_image_stack_has_no_language_model_rows():
    plan = evaluate_config("p5-fsx", P5_FILLED)
    assert plan.estimate["language_models"] == [] and "Language models" not in render(plan)


def test_plan_json_carries_each_experiments_figures(capsys, tmp_path):
    code = main(["plan", "llm", "--json", "--project-dir", str(project(tmp_path, "llm", llm_stack()))])
    out = capsys.readouterr().out
    assert code == 0
    rows = json.loads(out)["estimate"]["language_models"]
    assert [r["experiment"] for r in rows] == ["llama8b", "llama8b-compiled", "llama8b-fp8"]
    for r in rows:
        for key in ("parameters", "flops_per_token", "memory_per_gpu_bytes", "tokens_per_s_per_gpu_estimate",
                    "usd_per_billion_tokens_estimate"):
            assert isinstance(r[key], (int, float)), (key, r)
    assert [r["tokens_per_s_per_gpu_estimate"] for r in rows] == [6785, 6667, 8532]
