"""``eksbench run llm --local``: the llm stack's language-model experiments scaled down to this machine (Llama 3
``tiny`` on two torchrun agents, FSDP2 over gloo, the shipped text prepared as pre-tokenized shards), and what
``results.load`` then reads of them."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench.local import plan as lr
from core.config.model import Experiment, LocalRun
from tests.workloads.conftest import ROOT, child_env

EIGHT_B = Experiment(name="llama8b", workload="llama3", model_size="8b", min_nodes=2, max_nodes=2, gpus_per_node=8,
                     batch_size=1, seq_len=8192, precision="bf16", steps=100, tensor_parallel=8,
                     dataset="fineweb-edu-10bt-sample", checkpoint_minutes=30, sharding="hsdp")


def test_a_language_model_is_scaled_to_the_local_shape_and_says_what_changed(tmp_path):
    local = LocalRun(nodes=2, procs_per_node=1, steps=30, batch_size=8)
    exp = lr.scale_experiment(EIGHT_B, local, results_dir=str(tmp_path), data_dir=str(tmp_path / "_data"))
    t = exp.train
    assert (t.model_size, t.seq_len, t.tensor_parallel, t.sharding) == ("tiny", 0, 1, "hsdp")
    assert t.dataset == "text-bytes" and t.val_every == 10 and t.batch_size == 1 and t.steps == 30
    assert t.precision in ("bf16", "fp32")  # what this CPU runs fast
    said = " ".join(exp.notes)
    assert "model 8b -> tiny" in said and "tensor_parallel 8 -> 1" in said
    assert "fineweb-edu-10bt-sample: the shipped text-bytes locally" in said and "channels_last" not in said
    # two processes a node hold a TP group of 2; synthetic tokens stay synthetic
    two = lr.scale_experiment(replace(EIGHT_B, tensor_parallel=2, dataset="synthetic"),
                              replace(local, procs_per_node=2), results_dir=str(tmp_path), data_dir=str(tmp_path))
    assert two.train.tensor_parallel == 2 and two.train.dataset == "synthetic" and two.procs_per_node == 2


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("llm")
    done = subprocess.run([sys.executable, "-m", "bench", "run", "llm", "--local", "--experiment", "llama8b-text",
                           "--run-id", "t", "--results-root", str(root)], cwd=ROOT, env=child_env(2),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "llama8b-text" in done.stdout and "tokens/s" in done.stdout and "val loss" in done.stdout
    return root / "llm" / "t"


def test_the_local_llm_run_trains_tiny_on_the_shipped_text_and_its_loss_falls(llm_run):
    summary = json.loads((llm_run / "llama8b-text" / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["coverage"]["steps"] == 30
    lm = summary["language_model"]
    assert lm["model_size"] == "tiny" and lm["seq_len"] == 128 and lm["mesh"] == {"dp_shard": 2}
    assert lm["tokens_per_s"] > 0 and lm["tokens_per_s_per_device"] > 0 and lm["flops_per_token"] == 2_806_272
    vals = [v["val_loss"] for v in lm["val_losses"]]
    assert len(vals) == 3 and vals[-1] < vals[0] - 0.5  # falling, on held-out text (a fresh model: about ln(257) = 5.55)
    assert lm["final_loss"] < lm["first_loss"] and lm["target_loss"] is None  # 3.3 is for Llama 3's tokenizer
    assert (llm_run / "llama8b-text" / "checkpoints" / "latest.pt").is_file()  # real data: checkpointed


def test_results_load_reads_the_language_model_columns(llm_run):
    from bench import results

    df = results.load(str(llm_run))
    row = df[df["experiment"] == "llama8b-text"].iloc[0]
    assert row["tokens_per_s"] > 0 and row["flops_per_token"] == 2_806_272 and row["model_size"] == "tiny"
    assert row["final_val_loss"] < 5.5 and row["seq_len"] == 128
