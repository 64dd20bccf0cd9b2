"""Peak dense tensor throughput per GPU model and precision, for model FLOPs utilisation (MFU).

MFU = achieved model FLOP/s per GPU / the GPU's peak for the precision trained in. Figures are
TFLOP/s, **dense** (no 2:4 sparsity), boost clock, from NVIDIA's datasheets (the SXM part where
AWS ships SXM):

- V100 SXM2 (p3, p3dn): "NVIDIA Tesla V100 GPU Accelerator" datasheet: 125 tensor (fp16), 15.7 fp32.
  No bf16.
- T4 (g4dn): "NVIDIA T4 Tensor Core GPU" datasheet: 65 fp16 (mixed), 8.1 fp32. No bf16.
- A10G (g5): AWS's variant of the A10; NVIDIA publishes no A10G datasheet. The "NVIDIA A10 Tensor
  Core GPU" datasheet gives 125 bf16/fp16, 62.5 TF32, 31.2 fp32. A10G runs at lower clocks, so
  its MFU against these figures is a lower bound (doubtful: re-check against a measured matmul peak).
- L4 (g6): "NVIDIA L4 Tensor Core GPU" datasheet: 121 bf16/fp16, 60 TF32, 30.3 fp32 (dense = half
  of the sparse figures it headlines).
- L40S (g6e): "NVIDIA L40S" datasheet: 362 bf16/fp16, 183 TF32, 91.6 fp32.
- A100 SXM4 40/80 GB (p4d, p4de): "NVIDIA A100 Tensor Core GPU" datasheet: 312 bf16/fp16, 156 TF32, 19.5 fp32.
- H100 SXM5 (p5): "NVIDIA H100 Tensor Core GPU" datasheet: 989 bf16/fp16, 495 TF32, 67 fp32.
- H200 SXM (p5e): "NVIDIA H200 Tensor Core GPU" datasheet: same compute as H100 SXM.

``fp32`` training of convolutions runs on TF32 tensor cores on Ampere and later (PyTorch's
default ``torch.backends.cudnn.allow_tf32=True``), so its peak is TF32 there and plain fp32 on
V100/T4. No torch here.
"""

from __future__ import annotations

SOURCES = "NVIDIA product datasheets (dense, boost clock); see core/catalog/peaks.py"

# model -> precision -> dense TFLOP/s (None: the GPU has no such tensor math). fp8: the dense float8 figure of the
# same datasheets (H100/H200 SXM 1,979; L4 242.5 and L40S 733 dense, halves of their sparse headline figures);
# none before Ada/Hopper.
PEAK_TFLOPS: dict[str, dict[str, float | None]] = {
    "V100": {"bf16": None, "amp-fp16": 125.0, "fp32": 15.7, "fp8": None},
    "T4": {"bf16": None, "amp-fp16": 65.0, "fp32": 8.1, "fp8": None},
    "A10G": {"bf16": 125.0, "amp-fp16": 125.0, "fp32": 62.5, "fp8": None},
    "L4": {"bf16": 121.0, "amp-fp16": 121.0, "fp32": 60.0, "fp8": 242.5},
    "L40S": {"bf16": 362.0, "amp-fp16": 362.0, "fp32": 183.0, "fp8": 733.0},
    "A100": {"bf16": 312.0, "amp-fp16": 312.0, "fp32": 156.0, "fp8": None},
    "H100": {"bf16": 989.0, "amp-fp16": 989.0, "fp32": 495.0, "fp8": 1979.0},
    "H200": {"bf16": 989.0, "amp-fp16": 989.0, "fp32": 495.0, "fp8": 1979.0},
}
# A float8 run's MFU is given against the bf16 peak, as TorchTitan and AWS give it (their published float8 figures
# are comparable only so); the fp8 peak (NVIDIA's convention) is the language model block's ``mfu_fp8_peak``.
MFU_PEAK_PRECISION = {"fp8": "bf16"}
# Matched in this order against torch.cuda.get_device_name() ("NVIDIA H100 80GB HBM3",
# "Tesla V100-SXM2-16GB", "NVIDIA A10G", "NVIDIA L40S", ...): L40S before L4, H200 before H100.
MATCH_ORDER = ("H200", "H100", "A100", "A10G", "L40S", "L4", "V100", "T4")
NO_BF16 = tuple(m for m, p in PEAK_TFLOPS.items() if p["bf16"] is None)


def gpu_model(device_name: str | None) -> str | None:
    """The table's model for a device name, or None (CPU, or a GPU the table does not know)."""
    if not device_name:
        return None
    name = device_name.upper()
    return next((m for m in MATCH_ORDER if m in name), None)


def peak_tflops(device_name: str | None, precision: str) -> tuple[float | None, str | None]:
    """(peak dense TFLOP/s per GPU, None) or (None, why there is none)."""
    if not device_name or device_name == "cpu":
        return None, "CPU run: MFU is defined against a GPU's peak tensor throughput"
    model = gpu_model(device_name)
    if model is None:
        return None, f"no peak figure for {device_name!r} in core/catalog/peaks.py"
    peak = PEAK_TFLOPS[model].get(MFU_PEAK_PRECISION.get(precision, precision))
    if peak is None:
        return None, f"{model} has no {precision} tensor cores"
    return peak, None


def fp8_peak_tflops(device_name: str | None) -> float | None:
    """The GPU's dense float8 peak (NVIDIA's convention for a float8 run's MFU); None where it has none."""
    model = gpu_model(device_name)
    return PEAK_TFLOPS[model]["fp8"] if model else None
