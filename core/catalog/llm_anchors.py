"""Published Llama 3 pretraining throughput (tokens/s per GPU) that the plan estimates from and a run is read against.

Each record is one figure as its publisher printed it, with its source (repository, file, the commit it was read
at), the system, the GPU, the model, the precision, whether it was compiled, the GPU count, the sequence length,
the MFU where published, and what makes it differ from a run of ours (``caveats``). Read 2026-12-07 from:

- **TorchTitan, H100** (pytorch/torchtitan ``benchmarks/llama3_h100_202412_torchtitan.md``, read at b5bcd76; measured
  2024-12 with torchtitan 9dec370): Grand Teton hosts, 8 H100 **96 GB HBM2e at the default 500 W** each, 400 Gb/s
  RDMA per GPU. 8B with FSDP, local batch 2, selective checkpointing, at 8 and 128 GPUs. It publishes no MFU ("both
  BFLOAT16 Tensor Core and FP8 Tensor Core are involved"), only that bf16 reaches 33% to 39%.
- **TorchTitan, H100, 70B** (``benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md``, same hosts, 2025-06): 256
  GPUs, FSDP 32 x TP 8, compiled, full checkpointing, local batch 16 per TP group; vanilla and async TP. (FACTS.md
  names the 2024-12 file for these; they are in this one.)
- **AWS, p5** (aws-samples/awsome-distributed-training ``3.test_cases/pytorch/torchtitan/slurm/README.md``, read at
  7217859; logs of 2025-03-04): TorchTitan's ``llama3_8b.toml`` (batch 1, seq 8192, selective op checkpointing,
  FSDP) on 4 x p5.48xlarge, H100 80 GB HBM3 at 700 W, EFA; then compiled with float8.
- **NVIDIA DGX Cloud benchmarking v25.02** (NVIDIA/dgxc-benchmarking ``llama3.1/README_8b.md``, ``README_70b.md`` at
  8f5cbb3): NeMo 24.12 with Transformer Engine on DGX H100 (700 W, 8 x 400 Gb/s InfiniBand), Megatron parallelism
  (8B: CP 2; 70B: TP 4, PP 4, CP 2, VP 5), global batch 16 sequences per GPU; per-GPU figures are the printed
  tokens/s over the GPUs. Its ``launch.sh`` sets ``SYNTHETIC_DATA_ENABLED=False`` for 8B and 70B (the Pile,
  pre-processed; only 405B runs on mock data), where FACTS.md says synthetic. Its fp8 MFU divides by the fp8 peak.
- **TorchTitan, A100** (pytorch/torchtitan ``docs/performance.md`` @ 3faaa1a0; the rows date from 1ea476e9f,
  2024-04-24): 64 A100 80 GB, FSDP, local batch 1. Its MFU counts 6 x N with the embedding's parameters (that
  commit's ``train.py`` passes ``get_num_params(model)``, all of them, to ``get_num_flop_per_token``); ours and
  TorchTitan's since leave the embedding out, so the same tokens/s give 55.2% here for its 58.2% (8B) and 51.1% for
  its 51.7% (70B).

FLOPs per token and MFU: ``core.catalog.llm``; peaks: ``core.catalog.peaks``. Pure data; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.catalog.llm import MODELS, mfu
from core.catalog.peaks import PEAK_TFLOPS

TT_H100 = ("pytorch/torchtitan", "benchmarks/llama3_h100_202412_torchtitan.md", "b5bcd76")
TT_ASYNC_TP = ("pytorch/torchtitan", "benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md", "b5bcd76")
AWS_P5 = ("aws-samples/awsome-distributed-training", "3.test_cases/pytorch/torchtitan/slurm/README.md", "7217859")
DGXC_8B = ("NVIDIA/dgxc-benchmarking", "llama3.1/README_8b.md", "8f5cbb3")
DGXC_70B = ("NVIDIA/dgxc-benchmarking", "llama3.1/README_70b.md", "8f5cbb3")
TT_A100 = ("pytorch/torchtitan", "docs/performance.md", "3faaa1a0")

GRAND_TETON = "Grand Teton, 8 x H100 96 GB HBM2e a host"
TT_CAVEAT = ("H100 96 GB HBM2e at the default 500 W (a p5's are 80 GB HBM3 at 700 W); Meta's RDMA network, not EFA; "
             "torch-native FSDP2 as ours")
DGXC_CAVEAT = ("NeMo with Transformer Engine's fused kernels and Megatron parallelism, not FSDP2; DGX H100 at 700 W "
               "on InfiniBand, not EFA; 16 sequences per GPU a step")
A100_CAVEAT = ("published MFU counts the embedding's parameters (6 x N at torchtitan 1ea476e9f), ours leaves them out; "
               "2024-04 software")


@dataclass(frozen=True)
class LlmAnchor:
    """One published Llama 3 pretraining figure (see the module for every source)."""

    publisher: str  # who published it, as a label names it
    source: tuple[str, str, str]  # (repository, file, commit read at)
    system: str
    gpu_model: str  # core.catalog.aws InstanceType.gpu_model
    model_size: str  # core.catalog.llm.MODELS
    precision: str  # ours: bf16 or fp8
    compiled: bool  # torch.compile on (NVIDIA's NeMo: False, its kernels are fused by Transformer Engine)
    gpus: int
    tokens_per_s_per_gpu: float
    parallelism: str
    caveats: str
    seq_len: int = 8192
    published_mfu: float | None = None  # a fraction, as printed; None where not published
    mfu_peak: str = "bf16"  # the peak its publisher divides by (NVIDIA's fp8 rows: the fp8 peak)

    @property
    def label(self) -> str:
        """``AWS p5 8B bf16 6,785 tokens/s/GPU on 32 H100``."""
        compiled = " compiled" if self.compiled else ""
        return (f"{self.publisher} {self.model_size.upper()} {self.precision}{compiled} "
                f"{self.tokens_per_s_per_gpu:,.0f} tokens/s/GPU on {self.gpus} {self.gpu_model}")

    @property
    def where(self) -> str:
        repo, path, commit = self.source
        return f"{repo} {path} @ {commit}"


def _tt(size, precision, compiled, gpus, tps, parallelism, caveats=TT_CAVEAT, source=TT_H100):
    return LlmAnchor("TorchTitan", source, GRAND_TETON, "H100", size, precision, compiled, gpus, tps, parallelism,
                     caveats)


def _dgxc(size, precision, gpus, tokens_per_s, published_mfu):
    source, parallelism = ((DGXC_8B, "CP 2, global batch 16 a GPU") if size == "8b" else
                           (DGXC_70B, "TP 4, PP 4, CP 2, VP 5, global batch 2 a GPU"))
    return LlmAnchor("NVIDIA DGXC v25.02", source, "DGX H100 (8 x H100 80 GB HBM3, 700 W, InfiniBand)", "H100",
                     size, precision, False, gpus, tokens_per_s / gpus, parallelism, DGXC_CAVEAT,
                     published_mfu=published_mfu, mfu_peak=precision)


_FSDP8B = "FSDP, local batch 2, selective checkpointing"
_TT70B = "FSDP 32 x TP 8, full checkpointing, local batch 16 a TP group"
_AWS = "4 x p5.48xlarge (8 x H100 80 GB HBM3, 700 W, EFA)"
_AWS_CAVEAT = "TorchTitan on the same instance type as a p5 stack: the closest figure to a run of ours"
_A100_SYSTEM = "64 A100 80 GB (TorchTitan's cluster)"

ANCHORS: tuple[LlmAnchor, ...] = (
    _tt("8b", "bf16", False, 8, 5762, _FSDP8B), _tt("8b", "bf16", True, 8, 6667, _FSDP8B),
    _tt("8b", "fp8", True, 8, 8532, _FSDP8B + ", float8 tensorwise"),
    _tt("8b", "bf16", False, 128, 5605, _FSDP8B), _tt("8b", "bf16", True, 128, 6514, _FSDP8B),
    _tt("8b", "fp8", True, 128, 8380, _FSDP8B + ", float8 tensorwise"),
    _tt("70b", "bf16", True, 256, 597.3, _TT70B, source=TT_ASYNC_TP),
    _tt("70b", "bf16", True, 256, 652.4, _TT70B + ", async TP", source=TT_ASYNC_TP),
    _tt("70b", "fp8", True, 256, 809.8, _TT70B + ", float8 tensorwise", source=TT_ASYNC_TP),
    _tt("70b", "fp8", True, 256, 942.4, _TT70B + ", float8 tensorwise, async TP", source=TT_ASYNC_TP),
    LlmAnchor("AWS p5", AWS_P5, _AWS, "H100", "8b", "bf16", False, 32, 6785, "FSDP, batch 1, selective op "
              "checkpointing (TorchTitan llama3_8b.toml)", _AWS_CAVEAT, published_mfu=0.3973),
    LlmAnchor("AWS p5", AWS_P5, _AWS, "H100", "8b", "fp8", True, 32, 7865, "FSDP, batch 1, selective op "
              "checkpointing, float8 with float8 all-gather", _AWS_CAVEAT, published_mfu=0.4606),
    *(_dgxc("8b", "bf16", g, t, m) for g, t, m in ((8, 82028, 0.5999), (16, 161443, 0.5903), (32, 322638, 0.5899),
                                                    (64, 645277, 0.5899), (128, 1275155, 0.5828))),
    *(_dgxc("8b", "fp8", g, t, m) for g, t, m in ((8, 111054, 0.4059), (16, 221358, 0.4045), (32, 437088, 0.3994),
                                                   (64, 870639, 0.3977), (128, 1725163, 0.3941))),
    *(_dgxc("70b", "bf16", g, t, m) for g, t, m in ((64, 71756, 0.5452), (128, 142663, 0.5420),
                                                     (256, 284881, 0.5412), (512, 566797, 0.5384),
                                                     (1024, 1129246, 0.5363), (2048, 2260623, 0.5368))),
    *(_dgxc("70b", "fp8", g, t, m) for g, t, m in ((64, 100275, 0.3808), (128, 199292, 0.3784),
                                                    (256, 390167, 0.3704), (512, 779393, 0.3700),
                                                    (1024, 1549142, 0.3677), (2048, 3053178, 0.3623))),
    LlmAnchor("TorchTitan", TT_A100, _A100_SYSTEM, "A100", "8b", "bf16", False, 64, 2973,
              "FSDP, local batch 1, selective op checkpointing", A100_CAVEAT, published_mfu=0.582),
    LlmAnchor("TorchTitan", TT_A100, _A100_SYSTEM, "A100", "70b", "bf16", False, 64, 331,
              "FSDP, local batch 1, full checkpointing", A100_CAVEAT, published_mfu=0.517),
)
# Which publisher's figure to take: software like ours (TorchTitan's FSDP2 in PyTorch) before NVIDIA's NeMo, whose
# Transformer Engine kernels and Megatron parallelism run up to twice as fast (70B: 1,121 tokens/s/GPU on 64 GPUs
# against TorchTitan's 597 on 256); among those, the same instance type as a p5 stack's first.
PREFERENCE = ("AWS p5", "TorchTitan", "NVIDIA DGXC v25.02")
TORCH_NATIVE = ("AWS p5", "TorchTitan")


def anchor_mfu(anchor: LlmAnchor) -> float:
    """The anchor's MFU by our formula (``core.catalog.llm``) against the peak its publisher divides by: where it
    published one, this reproduces it, except TorchTitan's A100 rows (see the module)."""
    flops = MODELS[anchor.model_size].flops_per_token(anchor.seq_len)
    peak = PEAK_TFLOPS[anchor.gpu_model][anchor.mfu_peak]
    assert peak is not None, anchor  # every anchor's GPU has the tensor math it was measured in
    return mfu(flops, anchor.tokens_per_s_per_gpu, peak)


def nearest_anchor(model_size: str, gpu_model: str | None, precision: str, gpus: int,
                   compiled: bool | None = None) -> LlmAnchor | None:
    """The published figure of the same GPU model (never another GPU's), model and precision: a torch-native one
    (``TORCH_NATIVE``) before NVIDIA's, then one compiled as asked (``compiled``; None: either), then the one at the
    GPU count nearest ``gpus`` (by ratio: 16 is as near 8 as 32), then by ``PREFERENCE``, the plain figure before
    an async-TP one. None where there is none."""
    rows = [a for a in ANCHORS if (a.model_size, a.gpu_model, a.precision) == (model_size, gpu_model, precision)]
    if not rows:
        return None

    def rank(a: LlmAnchor) -> tuple:
        as_asked = compiled is None or a.compiled == compiled
        return (a.publisher not in TORCH_NATIVE, not as_asked, round(abs(math.log2(max(gpus, 1) / a.gpus)), 6),
                PREFERENCE.index(a.publisher), "async TP" in a.parallelism)

    return min(rows, key=rank)


def published_precisions(model_size: str, gpu_model: str | None) -> tuple[str, ...]:
    """The precisions published for ``model_size`` on ``gpu_model`` (for a message where none matches)."""
    return tuple(dict.fromkeys(a.precision for a in ANCHORS
                               if (a.model_size, a.gpu_model) == (model_size, gpu_model)))
