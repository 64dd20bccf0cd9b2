"""Llama 3 model shapes and the arithmetic every LLM figure is made of: parameters, FLOPs per token, MFU.

Shapes are TorchTitan's (pytorch/torchtitan ``torchtitan/models/llama3/__init__.py``, ``llama3_configs``; the
same figures at e7c0cae and at 2026's HEAD), with its FFN rule (``compute_ffn_hidden_dim``: hidden = 4 x dim,
then int(2 x hidden / 3), then x ffn_dim_multiplier, rounded up to a multiple of ``multiple_of``). ``1b`` is
Llama 3.2 1B (Meta's ``params.json``: 2048 / 16 / 32 heads / 8 KV heads, ffn multiplier 1.5, tied embeddings:
1,235,814,400 parameters); TorchTitan has no 1B flavor. ``tiny`` is this product's own, for CPU runs and tests: a
byte-level vocabulary (256 byte values and one end-of-text token) at sequence length 128.

FLOPs per token are counted the way TorchTitan (``get_dense_model_nparams_and_flops``), NVIDIA's DGX Cloud
recipes and NeMo count them: 6 x (N - N_embedding) + 12 x L x H x Q x T, with N_embedding the token embedding's
parameters (the output projection counts as a matmul), L layers, H heads of size Q (H x Q = width), T the
sequence length: attention counted as the full square, recomputation (activation checkpointing) not counted. For
8B at T = 8192 that is 57,914,449,920. MFU divides achieved model FLOP/s per GPU by the dense peak of
``core.catalog.peaks``: for float8 TorchTitan and AWS divide by the bf16 peak, NVIDIA by the fp8 peak, so both are
given, labelled.

Standard library only (the pods ship ``core/``).
"""

from __future__ import annotations

from dataclasses import dataclass

BYTE_VOCAB = 257  # 256 byte values and the end-of-text token (id 256) of the byte-level tokenizer
LLAMA3_VOCAB = 128_256  # Llama 3's tiktoken vocabulary


@dataclass(frozen=True)
class LlamaShape:
    """One Llama 3 flavor's shape; the model (workloads.train.pytorch.llama) is built from it alone."""

    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    multiple_of: int
    ffn_dim_multiplier: float | None = None
    rope_theta: float = 500_000.0
    norm_eps: float = 1e-5
    tied_embeddings: bool = False
    default_seq_len: int = 8192
    source: str = "pytorch/torchtitan torchtitan/models/llama3/__init__.py"

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def ffn_hidden(self) -> int:
        """TorchTitan's ``compute_ffn_hidden_dim(dim, multiple_of, ffn_dim_multiplier)``."""
        hidden = int(2 * (4 * self.dim) / 3)
        if self.ffn_dim_multiplier is not None:
            hidden = int(self.ffn_dim_multiplier * hidden)
        return self.multiple_of * ((hidden + self.multiple_of - 1) // self.multiple_of)

    @property
    def layer_parameters(self) -> int:
        """One transformer block: wq, wk, wv, wo, the SwiGLU's w1, w2, w3 and its two RMSNorm weights."""
        kv = self.n_kv_heads * self.head_dim
        attention = self.dim * self.dim * 2 + self.dim * kv * 2
        return attention + 3 * self.dim * self.ffn_hidden + 2 * self.dim

    @property
    def embedding_parameters(self) -> int:
        return self.vocab_size * self.dim

    @property
    def parameters(self) -> int:
        """Every trained parameter: embedding, blocks, the final norm and the output projection (shared with
        the embedding where tied)."""
        output = 0 if self.tied_embeddings else self.vocab_size * self.dim
        return self.embedding_parameters + self.n_layers * self.layer_parameters + self.dim + output

    def flops_per_token(self, seq_len: int) -> int:
        """Training FLOPs per token (forward and backward): 6 x (N - N_embedding) + 12 x L x dim x T, the output
        projection counted as a matmul: with tied embeddings (1b) N holds the shared matrix once, so it is added
        back (TorchTitan's formula, written for untied models, would leave 1B's output layer uncounted)."""
        matmuls = self.parameters - self.embedding_parameters + (self.vocab_size * self.dim if self.tied_embeddings
                                                                 else 0)
        return 6 * matmuls + 12 * self.n_layers * self.dim * seq_len


MODELS: dict[str, LlamaShape] = {
    "tiny": LlamaShape("tiny", dim=128, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=BYTE_VOCAB, multiple_of=32,
                       default_seq_len=128, source="eksbench's own CPU shape (byte-level vocabulary)"),
    "debug": LlamaShape("debug", dim=256, n_layers=6, n_heads=16, n_kv_heads=16, vocab_size=2048, multiple_of=256,
                        default_seq_len=2048, source="pytorch/torchtitan llama3_configs['debugmodel']"),
    "1b": LlamaShape("1b", dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, vocab_size=LLAMA3_VOCAB, multiple_of=256,
                     ffn_dim_multiplier=1.5, tied_embeddings=True,
                     source="Llama 3.2 1B (meta-llama params.json); TorchTitan has no 1B flavor"),
    "8b": LlamaShape("8b", dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=LLAMA3_VOCAB, multiple_of=1024,
                     ffn_dim_multiplier=1.3, source="pytorch/torchtitan llama3_configs['8B']"),
    "70b": LlamaShape("70b", dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, vocab_size=LLAMA3_VOCAB,
                      multiple_of=4096, ffn_dim_multiplier=1.3, source="pytorch/torchtitan llama3_configs['70B']"),
}
MODEL_SIZES = tuple(MODELS)


def mfu(flops_per_token: float, tokens_per_s_per_gpu: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s per GPU over the GPU's dense peak (TFLOP/s)."""
    return flops_per_token * tokens_per_s_per_gpu / (peak_tflops * 1e12)


def usd_per_billion_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    """What a billion trained tokens cost at ``tokens_per_s`` (all the instances' tokens) and ``usd_per_hour``
    (all the instances' price)."""
    return usd_per_hour / 3600.0 / tokens_per_s * 1e9
