"""Measured training rates on one GPU, and what torch.compile costs and gains, per workload: the figures the
GPU defaults (``core.config.gpu_defaults``) decide from, each with its source.

Source: the first GPU measurements of this product's trainer (2026-11), on one
H100 80GB SXM (torch 2.11.0+cu130), ResNet-50, 224 px, channels_last, amp-fp16, batch 256, fused SGD, plain
PyTorch loops: eager 4,932 img/s, ``torch.compile`` (default mode) 5,912 img/s. Real images (ImageFolder,
400 px JPEGs, through the trainer): Pillow in 8 workers 1,852 img/s, in 14 workers 4,101; nvJPEG
(``input_path: nvjpeg``) 1,530 img/s. DALI (``input_path: dali``, the GPU default) is not measured yet.

Compile gains are kept per GPU model (``InstanceType.gpu_model`` of ``core.catalog.aws``). A run's steady time is
estimated at its own GPU's eager rate (``eager_rate``), never another GPU's: the rate measured here, else NVIDIA's
published one-GPU figure for that GPU and precision (``core.catalog.scaling_anchors``: ResNet-50 on a V100 in mixed
precision, 1,200 img/s, where the H100's 4,932 would make a p3's run look four times shorter); where neither
exists the estimate says so and the run stays eager. The compile *gain* (compiled over eager) is the one ratio taken
across GPUs, from the GPU that measured it, which ``bench plan`` names ("compile gain measured on H100; none
measured on V100").

Owed (no GPU measured it yet): ResNet-50's compile time (``COMPILE_S_ESTIMATE``: the first step's extra
time, which the trainer now reports as the ``compile`` start-up phase) and every figure for the other
workloads. Replace the estimate with a measured figure and its source when one is taken.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.catalog.scaling_anchors import anchor_for

# torch.compile (Inductor, default mode) of ResNet-50's training step with cold caches (the pods' Inductor
# cache is an emptyDir, workloads/job_manifests.py): an estimate, not a measurement of this project (owed).
COMPILE_S_ESTIMATE = 90.0


@dataclass(frozen=True)
class CompileGain:
    gpu: str  # the GPU model measured, as core.catalog.aws names it
    eager_per_s: float  # steady samples/s on one GPU, eager
    compiled_per_s: float  # the same with torch.compile (default mode)
    compile_s: float  # the compiled first step's extra time, cold caches
    compile_s_measured: bool  # False: compile_s is an estimate (the figure is owed)
    source: str

    @property
    def payback_factor(self) -> float:
        """Compiling pays back when the steady time (eager) is at least this many times the compile time:
        the time it saves, steady x (1 - eager/compiled), then exceeds the compile time."""
        return self.compiled_per_s / (self.compiled_per_s - self.eager_per_s)


# workload -> GPU model -> its measured gain
COMPILE_GAINS: dict[str, dict[str, CompileGain]] = {
    "resnet50": {"H100": CompileGain(gpu="H100", eager_per_s=4932.0, compiled_per_s=5912.0,
                                     compile_s=COMPILE_S_ESTIMATE, compile_s_measured=False,
                                     source="one H100 80GB, torch 2.11, amp-fp16, batch 256, channels_last (2026-11)")},
}


def compile_gain(workload: str, gpu_model: str | None) -> CompileGain | None:
    """``workload``'s compile gain measured on ``gpu_model``, else on the first GPU that measured it (``gpu`` says
    which: the caller names it, and takes only its ratio, compiled over eager; the rate is ``eager_rate``'s); None
    where no GPU has."""
    by_gpu = COMPILE_GAINS.get(workload, {})
    return by_gpu.get(gpu_model or "") or next(iter(by_gpu.values()), None)


@dataclass(frozen=True)
class EagerRate:
    gpu: str  # the GPU model the figure is for
    per_s: float  # steady samples/s on one GPU, not compiled
    source: str  # what the figure is, for a reason to quote


def eager_rate(workload: str, gpu_model: str | None, precision: str) -> EagerRate | None:
    """One ``gpu_model`` GPU's steady rate for ``workload`` without torch.compile: measured here (``COMPILE_GAINS``),
    else NVIDIA's published one-GPU figure for that very GPU and ``precision`` (``core.catalog.scaling_anchors``);
    never another GPU's: None where neither has one. ``gpu_model`` None (a GPU the caller cannot name): the first
    GPU's measured figure, which ``gpu`` names."""
    by_gpu = COMPILE_GAINS.get(workload, {})
    measured = by_gpu.get(gpu_model) if gpu_model is not None else next(iter(by_gpu.values()), None)
    if measured is not None:
        return EagerRate(measured.gpu, measured.eager_per_s, f"measured on {measured.gpu}")
    found = anchor_for(workload, precision, gpu_model)
    if found is None or not found[1]:
        return None
    a = found[0]
    return EagerRate(gpu_model or a.gpu_model, a.images_per_s_1,
                     f"NVIDIA's published one-{a.gpu_model} figure, {a.published_precision}, DeepLearningExamples")

# Real-image input paths measured feeding a workload on one H100, per workload: input path -> what was measured.
INPUT_RATES: dict[str, dict[str, str]] = {
    "resnet50": {"pillow": "Pillow in 8 workers 1,852 img/s, in 14 workers 4,101",
                 "nvjpeg": "nvJPEG (decode_jpeg) 1,530 img/s"},
}
INPUT_SOURCE = "one H100, 400 px JPEGs, against 4,932 img/s eager on synthetic data (2026-11)"
