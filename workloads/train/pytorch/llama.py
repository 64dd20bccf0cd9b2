"""The Llama 3 language model, torch-native: built from a ``core.catalog.llm.LlamaShape`` alone.

It mirrors TorchTitan's model (pytorch/torchtitan ``torchtitan/models/llama3/model/model.py``) module for module,
so the tensor-parallel plan of ``llama_parallel`` reads like TorchTitan's and a checkpoint's keys match:
``tok_embeddings``, ``layers`` (a ModuleDict keyed "0", "1", ..., so each block can be wrapped and replaced by
name), ``norm`` (``torch.nn.RMSNorm``), ``output`` (no bias; the embedding's own weight where the shape ties
them); each block holds ``attention_norm``, ``attention`` (``wq``, ``wk``, ``wv``, ``wo``: grouped-query attention
with causal ``scaled_dot_product_attention``), ``ffn_norm`` and ``feed_forward`` (SwiGLU ``w2(silu(w1 x) * w3 x)``).

RoPE is TorchTitan's ``ComplexRoPE`` (``torchtitan/models/common/rope.py``: adjacent dimensions form a pair, with
Llama 3.1's "llama" frequency scaling) written in real cos/sin arithmetic: the same numbers, with no complex
tensors, which DTensor on a CPU and ``torch.compile`` handle less well. The attention reads its local head count
from its inputs (``view(..., -1, head_dim)``, as TorchTitan does), so after tensor parallelism each rank attends
over its own heads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from core.catalog.llm import LlamaShape


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's RoPE frequency scaling: TorchTitan's ``RoPE.Config`` defaults for ``scaling="llama"``."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context: int = 8192


LLAMA3_ROPE_SCALING = RopeScaling()


def rope_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None = LLAMA3_ROPE_SCALING) -> torch.Tensor:
    """The ``head_dim // 2`` rotation frequencies, scaled as ``ComplexRoPE._precompute_cache`` scales them:
    long wavelengths (beyond the original context / low_freq_factor) slowed by ``factor``, short ones (below
    original context / high_freq_factor) kept, the ones between blended smoothly."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    if scaling is None:
        return freqs
    wavelen = 2 * math.pi / freqs
    high_freq_wavelen = scaling.original_context / scaling.high_freq_factor
    low_freq_wavelen = scaling.original_context / scaling.low_freq_factor
    freqs = torch.where(wavelen > low_freq_wavelen, freqs / scaling.factor, freqs)
    smooth = (scaling.original_context / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor)
    smoothed = (1 - smooth) * freqs / scaling.factor + smooth * freqs
    medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(medium, smoothed, freqs)


def rope_cache(head_dim: int, seq_len: int, theta: float) -> torch.Tensor:
    """``(seq_len, head_dim)``: the cosines of every position's angles, then their sines (fp32)."""
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), rope_frequencies(head_dim, theta))
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


def apply_rope(x: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    """Rotate each adjacent pair (x[2i], x[2i+1]) of ``x`` ``(batch, seq, heads, head_dim)`` by its position's
    angle: the real form of TorchTitan's ``view_as_complex(x) * freqs_cis``, computed in fp32."""
    half = x.shape[-1] // 2
    cos = cache[: x.shape[1], :half].view(1, x.shape[1], 1, half)
    sin = cache[: x.shape[1], half:].view(1, x.shape[1], 1, half)
    pairs = x.float().reshape(*x.shape[:-1], half, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.flatten(3).type_as(x)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Each key/value head repeated for the ``n_rep`` query heads that share it (TorchTitan's ``repeat_kv``)."""
    if n_rep == 1:
        return x
    bs, seq, n_kv, head_dim = x.shape
    return x.unsqueeze(3).expand(bs, seq, n_kv, n_rep, head_dim).reshape(bs, seq, n_kv * n_rep, head_dim)


class Attention(nn.Module):
    """Grouped-query attention: ``n_heads`` query heads over ``n_kv_heads`` key/value heads."""

    def __init__(self, shape: LlamaShape):
        super().__init__()
        self.head_dim = shape.head_dim
        self.n_rep = shape.n_heads // shape.n_kv_heads  # the same on every rank: TP splits both head counts
        self.wq = nn.Linear(shape.dim, shape.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(shape.dim, shape.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(shape.dim, shape.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(shape.n_heads * self.head_dim, shape.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        bs, seq, _ = x.shape
        # -1, not n_heads: under tensor parallelism wq/wk/wv give this rank's heads only (TorchTitan's note).
        xq = self.wq(x).view(bs, seq, -1, self.head_dim)
        xk = self.wk(x).view(bs, seq, -1, self.head_dim)
        xv = self.wv(x).view(bs, seq, -1, self.head_dim)
        xq, xk = apply_rope(xq, rope), apply_rope(xk, rope)
        keys, values = repeat_kv(xk, self.n_rep), repeat_kv(xv, self.n_rep)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                             is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, seq, -1))


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1(x)) * w3(x))``, hidden width ``shape.ffn_hidden``."""

    def __init__(self, shape: LlamaShape):
        super().__init__()
        self.w1 = nn.Linear(shape.dim, shape.ffn_hidden, bias=False)
        self.w2 = nn.Linear(shape.ffn_hidden, shape.dim, bias=False)
        self.w3 = nn.Linear(shape.dim, shape.ffn_hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-norm block: ``h = x + attention(attention_norm(x))``, ``out = h + feed_forward(ffn_norm(h))``."""

    def __init__(self, layer_id: int, shape: LlamaShape):
        super().__init__()
        self.layer_id = layer_id
        self.attention_norm = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.attention = Attention(shape)
        self.ffn_norm = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.feed_forward = FeedForward(shape)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), rope)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    """The decoder: ``forward(tokens[B, T]) -> logits[B, T, vocab]`` for ``T <= seq_len``."""

    def __init__(self, shape: LlamaShape, seq_len: int):
        super().__init__()
        self.shape, self.seq_len = shape, seq_len
        self.tok_embeddings = nn.Embedding(shape.vocab_size, shape.dim)
        self.register_buffer("rope_cache", rope_cache(shape.head_dim, seq_len, shape.rope_theta), persistent=False)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(i, shape) for i in range(shape.n_layers)})
        self.norm = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.output = nn.Linear(shape.dim, shape.vocab_size, bias=False)
        if shape.tied_embeddings:
            self.output.weight = self.tok_embeddings.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.rope_cache)
        return self.output(self.norm(h))

    @torch.no_grad()
    def init_weights(self, seed: int = 0, buffer_device: torch.device | None = None) -> None:
        """TorchTitan's initialisation (``Transformer.init_weights`` with ``depth_init``), drawn from ``seed``:

        - ``wq``, ``wk``, ``wv``, ``w1``: truncated normal, std 0.02 (cut at +-2, ``trunc_normal_``'s default);
        - ``wo``, ``w2``, ``w3``: std 0.02 / sqrt(2 (layer_id + 1)), smaller the deeper the block;
        - the embedding: normal, std 1; the norms: ones;
        - ``output``: truncated normal, std dim^-0.5, cut at 3 std;
        - a tied embedding (it is the output projection too; std 1 would make the first logits huge): normal,
          std 0.02, the ``initializer_range`` of Llama 3.2 1B's Hugging Face config.

        Call it on the whole model before ``llama_parallel.parallelize`` for the same numbers on every layout; a
        model built on the meta device is initialised after ``to_empty``, which also rebuilds the RoPE cache
        there (``buffer_device``, default: where the parameters are).
        """
        device = buffer_device or self.norm.weight.device
        self.rope_cache = rope_cache(self.shape.head_dim, self.seq_len, self.shape.rope_theta).to(device)
        if device.type == "meta":
            return
        with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device],
                                   device_type="cuda" if device.type == "cpu" else device.type):
            torch.manual_seed(seed)
            self._draw_weights()

    def _draw_weights(self) -> None:
        if not self.shape.tied_embeddings:
            nn.init.normal_(self.tok_embeddings.weight)
        for block in self.layers.values():
            block = getattr(block, "_checkpoint_wrapped_module", block)  # if wrapped before the init
            depth_std = 0.02 / (2 * (block.layer_id + 1)) ** 0.5
            for norm in (block.attention_norm, block.ffn_norm):
                norm.reset_parameters()
            for linear, std in ((block.attention.wq, 0.02), (block.attention.wk, 0.02), (block.attention.wv, 0.02),
                                (block.attention.wo, depth_std), (block.feed_forward.w1, 0.02),
                                (block.feed_forward.w2, depth_std), (block.feed_forward.w3, depth_std)):
                nn.init.trunc_normal_(linear.weight, mean=0.0, std=std)
        self.norm.reset_parameters()
        if self.shape.tied_embeddings:
            nn.init.normal_(self.output.weight, std=0.02)
            return
        std = self.shape.dim ** -0.5
        nn.init.trunc_normal_(self.output.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)


def build_llama(shape: LlamaShape, seq_len: int, *, seed: int = 0) -> Llama:
    """The model for ``shape`` at sequence length ``seq_len``, initialised from ``seed`` (left uninitialised
    when built under ``with torch.device("meta")``: call ``init_weights`` after ``to_empty``)."""
    if shape.dim % shape.n_heads or shape.n_heads % shape.n_kv_heads:
        raise ValueError(f"Llama shape {shape.name!r}: dim {shape.dim} must split into {shape.n_heads} heads, and "
                         f"those into {shape.n_kv_heads} key/value groups")
    model = Llama(shape, seq_len)
    model.init_weights(seed)
    return model
