"""The llama3 workload through the trainer and the results launcher, in the shape its Jobs run it: torchrun with two
processes over gloo, FSDP2 (and tensor parallelism of 2), on the shipped text prepared as pre-tokenized shards.

What only the whole trainer shows: the sharded model's checkpoint gathered on rank 0 and loaded back into every
rank's shards on resume; a tensor-parallel pair training one batch between them (one data-parallel rank); the
validation losses every ``--val-every`` steps; and the summary's ``language_model`` block with its token figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.catalog.llm import MODELS
from core.contract.train_args import TrainArgs
from tests.workloads.conftest import ROOT, child_env, launched_on_two_gloo_processes, run_training
from workloads.train.common.metrics import metrics_dir, read_jsonl


@pytest.fixture(scope="module")
def text_data(tmp_path_factory) -> Path:
    """The shipped text as a user prepares it (``eksbench data prepare text-bytes --to DIR``)."""
    data = tmp_path_factory.mktemp("data")
    done = subprocess.run([sys.executable, "-m", "bench", "data", "prepare", "text-bytes", "--to",
                           str(data / "text-bytes")], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return data


def train(results: Path, data: Path, steps: int, **kw) -> dict:
    """Launcher -> torchrun (2 processes, c10d on loopback) -> the PyTorch trainer on llama3 tiny; the summary."""
    args = TrainArgs(workload="llama3", model_size="tiny", seq_len=64, batch_size=2, precision="fp32", steps=steps,
                     dataset="text-bytes", data_dir=str(data), results_dir=str(results), warmup_steps=1, log_every=2,
                     checkpoint_minutes=0, collective_timeout=120, activation_checkpoint="none", **kw)
    done = run_training(launched_on_two_gloo_processes(args, "lm"), env=child_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((results / "summary.json").read_text())


def test_fsdp_checkpoint_resumes_into_the_shards(tmp_path, text_data):
    results = tmp_path / "fsdp"
    first = train(results, text_data, 4, checkpoint_every=4, val_every=2)
    saved = json.loads((results / "checkpoints" / "latest.json").read_text())
    assert saved["step"] == 4 and saved["args"]["model_size"] == "tiny"
    second = train(results, text_data, 6, checkpoint_every=4, val_every=2)
    events = read_jsonl(metrics_dir(results) / "events.jsonl")
    assert any(e.get("event") == "resume" and e["step"] == 4 for e in events)
    lines = [r for r in read_jsonl(metrics_dir(results) / "rank-0.jsonl")]
    assert max(r["step"] for r in lines) == 6
    lm = second["language_model"]
    assert lm["mesh"] == {"dp_shard": 2} and lm["data_parallel"] == 2 and lm["sharding"] == "fsdp"
    assert [v["step"] for v in lm["val_losses"]] == [2, 4, 6]  # the first attempt's, then the resumed one's
    # resumed from the gathered weights: the loss goes on from where the first attempt left it, not from ln(257)
    assert lm["val_losses"][-1]["val_loss"] < lm["val_losses"][0]["val_loss"]
    assert first["language_model"]["first_loss"] > 5.0  # a fresh byte-level model: about ln(257) = 5.55
    assert lm["flops_per_token"] == MODELS["tiny"].flops_per_token(64)
    assert lm["tokens_per_s"] == pytest.approx(second["throughput"]["samples_per_s_total"] * 64, rel=1e-3)
    assert lm["tokens_per_s_per_device"] == pytest.approx(lm["tokens_per_s"] / 2, rel=1e-2)
    assert second["mfu"] is None and lm["mfu"] is None  # a CPU run has no peak to divide by


def test_a_tensor_parallel_pair_trains_one_batch_between_them(tmp_path, text_data):
    summary = train(tmp_path / "tp", text_data, 3, tensor_parallel=2)
    lm = summary["language_model"]
    assert lm["mesh"] == {"dp_shard": 1, "tp": 2} and lm["data_parallel"] == 1 and lm["tensor_parallel"] == 2
    lines = {r: read_jsonl(metrics_dir(tmp_path / "tp") / f"rank-{r}.jsonl") for r in (0, 1)}
    # one data-parallel rank: both ranks see the same batch, so the same loss, to the last digit
    assert [x["loss"] for x in lines[0]] == [x["loss"] for x in lines[1]]
    # batch_size stays sequences per GPU: the pair trains 2 x 2 sequences a step, each rank counts its 2
    assert all(x["samples"] == 2 * x["steps"] for x in lines[0])
