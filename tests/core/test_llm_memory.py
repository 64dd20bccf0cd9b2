"""A Llama 3 shape's size and FLOPs (core.catalog.llm) and one GPU's training memory estimate (core.catalog.llm_memory):
TorchTitan's counts, the memory the plan and the meaning rules judge an experiment by, and how it compares with the
peaks TorchTitan published."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.catalog.llm import MODELS
from core.catalog.llm_memory import GIB, activation_bytes_per_token_layer, gpu_memory_bytes, memory_per_gpu

H100, V100 = gpu_memory_bytes("p5.48xlarge"), gpu_memory_bytes("p3.16xlarge")


def one_node(size: str, capacity: int | None = H100, **changed):
    """``size`` on one node of 8 GPUs, batch 1 at its default sequence length, FSDP, selective checkpointing, bf16."""
    asked = dict(seq_len=MODELS[size].default_seq_len, batch=1, gpus_per_node=8, nodes=1, tp=1, sharding="fsdp",
                 activation_checkpoint="selective", precision="bf16", capacity=capacity)
    return memory_per_gpu(MODELS[size], **{**asked, **changed})


def test_parameters_and_flops_per_token_are_torchtitans():
    """FACTS.md, LLM pretraining: 8B has 8,030,261,248 parameters and 57.91 GFLOP per token at 8192 (TorchTitan's
    ``get_dense_model_nparams_and_flops``); 70B 481.4 GFLOP."""
    assert MODELS["8b"].parameters == 8_030_261_248
    assert MODELS["8b"].flops_per_token(8192) == 57_914_449_920
    assert MODELS["70b"].flops_per_token(8192) == pytest.approx(481.4e9, rel=1e-3)


def test_the_gpu_memory_comes_from_the_instance_catalog():
    assert (H100, V100) == (80 * GIB, 16 * GIB)
    assert gpu_memory_bytes("m6i.large") is None and gpu_memory_bytes("nope") is None


def test_70b_on_one_p5_node_does_not_fit_its_h100s():
    """The fp32 state alone, 16 bytes x 70.6 B parameters over 8 GPUs, is 131 GiB a GPU."""
    m = one_node("70b", activation_checkpoint="full")
    assert m.state == pytest.approx(16 * MODELS["70b"].parameters / 8, abs=1)
    assert m.fits is False and m.total > 80 * GIB
    assert m.text().startswith(f"{m.total / GIB:.1f} GiB of 80 GiB (state 131.4, ")


def test_8b_on_eight_16_gb_v100s_does_not_fit():
    m = one_node("8b", V100, precision="amp-fp16")
    assert m.fits is False and m.total > 16 * GIB and "of 16 GiB" in m.text()


def test_8b_on_one_p5_node_with_selective_checkpointing_fits():
    m = one_node("8b")
    assert m.fits is True and 40 * GIB < m.total < 60 * GIB
    assert m.logits == 8192 * 128_256 * 6  # bf16 logits and the loss's fp32 copy
    assert m.overhead == 2 * GIB


def test_each_term_moves_as_its_source_says():
    base = one_node("8b")
    none, full = one_node("8b", activation_checkpoint="none"), one_node("8b", activation_checkpoint="full")
    assert full.activations < base.activations < none.activations
    assert base.activations == pytest.approx(0.6 * none.activations, rel=1e-6)
    per_token_layer = activation_bytes_per_token_layer(MODELS["8b"])
    assert per_token_layer == 12 * 4096 + 4 * 1024 + 8 * 14336  # the Korthikanti-style count of a Llama block
    assert none.activations == 32 * 8192 * per_token_layer
    # more nodes shard the state (FSDP); HSDP shards within a node only
    assert one_node("8b", nodes=4).state == pytest.approx(base.state / 4, abs=1)
    assert one_node("8b", nodes=4, sharding="hsdp").state == base.state
    # fp32 doubles what is in flight and the activations
    fp32 = one_node("8b", precision="fp32")
    assert (fp32.activations, fp32.params_in_flight) == pytest.approx((2 * none.activations * 0.6,
                                                                        2 * base.params_in_flight), rel=1e-6)
    # tensor parallelism: the parameters in flight split; the TP group's batch x tp sequences keep each GPU's
    # activations the same, and so its logits (the loss is parallel: each GPU 1/tp of the vocabulary)
    tp = one_node("8b", tp=4)
    assert tp.params_in_flight == pytest.approx(base.params_in_flight / 4, rel=1e-6)
    assert tp.activations == base.activations and tp.logits == base.logits


def test_it_lands_near_torchtitans_published_peaks():
    """TorchTitan, benchmarks/llama3_h100_202412_torchtitan.md (8B, local batch 2, selective checkpointing, eager, on
    96 GB H100s): 82.4 GiB on 8 GPUs and 67.0 GiB on 128."""
    for nodes, published in ((1, 82.4), (16, 67.0)):
        m = one_node("8b", 96 * GIB, batch=2, nodes=nodes)
        assert m.total / GIB == pytest.approx(published, rel=0.05), (nodes, m.text())


def test_without_a_capacity_nothing_is_judged():
    m = one_node("8b", None)
    assert m.fits is None and " of " not in m.text()
    assert replace(m, capacity=H100).fits is True
