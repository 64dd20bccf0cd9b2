"""The Llama 3 model (workloads.train.pytorch.llama) and its parallelisation (llama_parallel) on a CPU.

Two gloo ranks under torchrun (llama_ranks.py beside this file) must train ``tiny`` to the same losses as one
process with the whole batch, for FSDP2, HSDP, tensor parallelism and activation checkpointing; the model must
count the parameters its shape does, rotate like TorchTitan's complex RoPE and learn a fixed batch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from core.catalog.llm import MODELS
from tests.workloads.conftest import ROOT, child_env, kill_tree
from tests.workloads.train.pytorch.llama_ranks import CASES, SEED, SEQ, TIED, token_batch, train_losses
from workloads.train.pytorch.llama import apply_rope, build_llama, rope_cache, rope_frequencies
from workloads.train.pytorch.llama_parallel import (
    TORCHAO_PIN,
    autocast_dtype,
    convert_to_float8,
    device_mesh,
    parallelize,
)

EAGER_CASES = [c for c in CASES if not CASES[c].compile]


def torchrun_cases(out: Path, cases: list[str], timeout_s: float) -> dict:
    """Run ``cases`` on two gloo ranks (torchrun picks a free port itself: ``--standalone``); what rank 0 wrote."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "tests.workloads.train.pytorch.llama_ranks", str(out), *cases]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        pytest.fail(f"two gloo ranks did not finish {cases} in {timeout_s:.0f} s")
    assert proc.returncode == 0, output[-4000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def one_process() -> dict[str, list[float]]:
    """Each shape's losses when one process trains the whole batch."""
    return {s.name: train_losses(build_llama(s, SEQ, seed=SEED), token_batch(s.vocab_size))
            for s in (MODELS["tiny"], TIED)}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> dict:
    return torchrun_cases(tmp_path_factory.mktemp("llama") / "losses.json", EAGER_CASES, timeout_s=420)


# --- the model -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ["tiny", "debug"])
def test_the_model_has_the_parameters_its_shape_counts(size):
    model = build_llama(MODELS[size], 128)
    assert sum(p.numel() for p in model.parameters()) == MODELS[size].parameters


@pytest.mark.parametrize("size", ["1b", "8b", "70b"])
def test_large_models_built_on_the_meta_device_count_their_parameters(size):
    with torch.device("meta"):
        model = build_llama(MODELS[size], 8192)
    assert sum(p.numel() for p in model.parameters()) == MODELS[size].parameters
    assert model.norm.weight.is_meta and model.rope_cache.is_meta
    if size == "8b":
        assert MODELS[size].parameters == 8_030_261_248
    if size == "1b":
        assert model.output.weight is model.tok_embeddings.weight


def test_module_names_are_torchtitans_and_the_rope_cache_is_not_saved():
    model = build_llama(MODELS["tiny"], 32)
    names = set(model.state_dict())
    block = {f"layers.1.{n}.weight" for n in ("attention_norm", "attention.wq", "attention.wk", "attention.wv",
                                             "attention.wo", "ffn_norm", "feed_forward.w1", "feed_forward.w2",
                                             "feed_forward.w3")}
    assert block <= names and {"tok_embeddings.weight", "norm.weight", "output.weight"} <= names
    assert not any("rope" in n for n in names) and model.rope_cache.shape == (32, MODELS["tiny"].head_dim)
    assert isinstance(model.layers, torch.nn.ModuleDict) and list(model.layers) == ["0", "1"]


def torchtitan_rope(x: torch.Tensor, head_dim: int, seq: int, theta: float) -> torch.Tensor:
    """TorchTitan's complex RoPE with "llama" scaling (torchtitan/models/common/rope.py ``ComplexRoPE``, and
    ``precompute_freqs_cis``/``apply_scaling`` of torchtitan/models/llama3/model/model.py), as written there."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: (head_dim // 2)].float() / head_dim))
    wavelen = 2 * torch.pi / freqs
    low_freq_wavelen, high_freq_wavelen = 8192 / 1.0, 8192 / 4.0
    new_freqs = torch.where(wavelen > low_freq_wavelen, freqs / 8.0, freqs)
    smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
    freqs = torch.where((wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen),
                        (1 - smooth) * new_freqs / 8.0 + smooth * new_freqs, new_freqs)
    freqs_cis = torch.polar(torch.ones(seq, head_dim // 2), torch.outer(torch.arange(seq).float(), freqs))
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_ * freqs_cis.view(1, seq, 1, head_dim // 2)).flatten(3)


def test_rope_in_cos_sin_arithmetic_rotates_as_torchtitans_complex_rope():
    shape = MODELS["8b"]  # head_dim 128, theta 500,000: wavelengths on both sides of the scaling's band
    x = torch.randn(2, 300, 4, shape.head_dim, generator=torch.Generator().manual_seed(0))
    ours = apply_rope(x, rope_cache(shape.head_dim, 300, shape.rope_theta))
    assert torch.allclose(ours, torchtitan_rope(x, shape.head_dim, 300, shape.rope_theta), atol=1e-5)
    freqs = rope_frequencies(shape.head_dim, shape.rope_theta)
    unscaled = rope_frequencies(shape.head_dim, shape.rope_theta, scaling=None)
    assert freqs[0] == unscaled[0] and torch.isclose(freqs[-1], unscaled[-1] / 8)  # fast kept, slow slowed 8x


def test_the_same_seed_draws_the_same_weights_and_another_seed_others():
    a, b, c = (build_llama(MODELS["tiny"], 16, seed=s) for s in (7, 7, 8))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.layers["0"].attention.wq.weight, c.layers["0"].attention.wq.weight)
    wo, wq = a.layers["1"].attention.wo.weight, a.layers["1"].attention.wq.weight
    assert wo.std() < wq.std() * 0.6  # wo's std is 0.02 / sqrt(2 x 2): deeper output projections start smaller


def test_tiny_overfits_a_fixed_batch_in_30_steps():
    """Two rows of 32 random tokens, AdamW 1e-3: from about ln(257) = 5.5 to well under a third of it."""
    losses = train_losses(build_llama(MODELS["tiny"], 32, seed=SEED), token_batch(257, batch=2, seq=32), steps=30)
    assert losses[-1] < losses[0] / 3 and max(losses[10:]) < losses[0]


# --- the parallel layouts, two gloo ranks ------------------------------------------------------------------------


@pytest.mark.local_run
@pytest.mark.parametrize("case", [c for c in EAGER_CASES if CASES[c].precision == "fp32"])
def test_two_gloo_ranks_train_to_the_losses_of_one_process(two_ranks, one_process, case):
    """FSDP2 (each rank half the batch), HSDP, tensor parallelism 2 (both ranks the whole batch), with and
    without activation checkpointing: the same three losses as one process, within 1e-5."""
    assert two_ranks[case]["losses"] == pytest.approx(one_process[CASES[case].shape.name], abs=1e-5)


@pytest.mark.local_run
def test_each_layout_has_the_mesh_it_asks_for(two_ranks):
    assert two_ranks["fsdp"]["mesh"] == [["dp_shard"], [2]]
    assert two_ranks["hsdp"]["mesh"] == [["dp_replicate", "dp_shard"], [2, 1]]
    assert two_ranks["tp"]["mesh"] == [["dp_shard", "tp"], [1, 2]]


@pytest.mark.local_run
def test_bf16_fsdp_gathers_bf16_parameters_and_stays_near_fp32(two_ranks, one_process):
    """MixedPrecisionPolicy(bf16 parameters, fp32 gradient reduction) on gloo: close to fp32, not equal."""
    bf16, fp32 = two_ranks["fsdp_bf16"]["losses"], one_process["tiny"]
    assert bf16 == pytest.approx(fp32, abs=2e-2) and bf16 != pytest.approx(fp32, abs=1e-6)


@pytest.mark.local_run
def test_compiled_checkpointed_blocks_under_fsdp_train_to_the_same_losses(tmp_path, one_process):
    """torch.compile (inductor, fullgraph) of each selectively checkpointed block, then FSDP2: the losses of
    eager one-process training. The slowest test here: inductor compiles a forward and a backward per rank."""
    found = torchrun_cases(tmp_path / "losses.json", ["fsdp_compile"], timeout_s=540)
    assert found["fsdp_compile"]["losses"] == pytest.approx(one_process["tiny"], abs=1e-5)


class MatmulCount(TorchDispatchMode):
    """Counts ``aten.mm`` calls made while it is active (the backward's recomputation among them)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten.mm.default
        return func(*args, **(kwargs or {}))


def backward_matmuls(activation_checkpoint: str) -> int:
    model = parallelize(build_llama(MODELS["tiny"], 16), None, tp=1, activation_checkpoint=activation_checkpoint,
                        compile=False, precision="fp32")
    loss = model(token_batch(257, batch=2, seq=16)[:, :-1]).sum()
    with MatmulCount() as counter:
        loss.backward()
    return counter.count


def test_full_checkpointing_recomputes_every_matmul_and_selective_every_second():
    """A block's forward makes 7 matmuls (wq, wk, wv, wo, w1, w3, w2). Full AC recomputes 6 of them in the
    backward: the last, w2, is not needed for any gradient, and non-reentrant checkpointing stops once it has what
    it needs (``torch.utils.checkpoint``'s early stop, on by default). TorchTitan's op policy saves the 1st, 3rd,
    5th and 7th and recomputes the other 3."""
    none, full, selective = (backward_matmuls(m) for m in ("none", "full", "selective"))
    layers = MODELS["tiny"].n_layers
    assert (full - none, selective - none) == (6 * layers, 3 * layers)


# --- the mesh and the refusals -----------------------------------------------------------------------------------


def test_one_process_without_tensor_parallelism_has_no_mesh_and_autocasts_bf16():
    assert device_mesh(1, 1, 1, "fsdp", "cpu") is None
    assert autocast_dtype(None, "bf16") is torch.bfloat16 and autocast_dtype(None, "fp32") is None


@pytest.mark.parametrize("args, message", [
    ((8, 3, 8, "fsdp", "cpu"), "must divide the 8 processes of a node"),
    ((16, 16, 8, "fsdp", "cpu"), "stays inside a node"),
    ((12, 1, 8, "hsdp", "cpu"), "the 12 processes of the run"),
    ((8, 1, 8, "ddp", "cpu"), "'ddp' is not one of fsdp, hsdp"),
])
def test_a_mesh_that_cannot_be_laid_out_is_refused(args, message):
    with pytest.raises(ValueError, match=message):
        device_mesh(*args)


def test_an_unknown_choice_is_refused_before_anything_changes():
    model = build_llama(MODELS["tiny"], 16)
    with pytest.raises(ValueError, match="activation_checkpoint 'some' is not one of none, selective, full"):
        parallelize(model, None, tp=1, activation_checkpoint="some", compile=False, precision="fp32")
    assert type(model.layers["0"]).__name__ == "TransformerBlock"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a float8 GPU")
def test_fp8_without_a_float8_gpu_is_refused_clearly():
    with pytest.raises(RuntimeError, match=r"fp8 needs a CUDA GPU .*capability >= 8.9"):
        parallelize(build_llama(MODELS["tiny"], 16), None, tp=1, activation_checkpoint="none", compile=False,
                    precision="fp8")


def test_fp8_without_torchao_names_the_pin(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchao", None)  # makes ``import torchao...`` raise ImportError
    monkeypatch.setitem(sys.modules, "torchao.float8", None)
    with pytest.raises(RuntimeError, match=TORCHAO_PIN.replace(".", r"\.")):
        convert_to_float8(build_llama(MODELS["tiny"], 16), "tensorwise", fsdp=False)


@pytest.mark.parametrize("recipe, fsdp", [("tensorwise", True), ("tensorwise", False), ("rowwise", True)])
def test_fp8_swaps_every_linear_but_the_output_for_torchaos(recipe, fsdp):
    pytest.importorskip("torchao.float8")
    from torchao.float8.float8_linear import Float8Linear

    model = convert_to_float8(build_llama(MODELS["tiny"], 16), recipe, fsdp=fsdp)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert len(linears) == 1 + 7 * MODELS["tiny"].n_layers
    assert {n for n, m in linears.items() if not isinstance(m, Float8Linear)} == {"output"}
    config = model.layers["0"].attention.wq.config
    assert config.enable_fsdp_float8_all_gather == (recipe == "tensorwise" and fsdp)
    assert config.cast_config_weight.scaling_granularity.value == ("tensorwise" if recipe == "tensorwise"
                                                                   else "axiswise")
