"""Measured training rates on one GPU, and what torch.compile costs and gains, per workload: the figures the
GPU defaults (``core.config.gpu_defaults``) decide from, each with its source.

Source: the first GPU measurements of this product's trainer (2026-11), on one
H100 80GB SXM (torch 2.11.0+cu130), ResNet-50, 224 px, channels_last, amp-fp16, batch 256, fused SGD, plain
PyTorch loops: eager 4,932 img/s, ``torch.compile`` (default mode) 5,912 img/s. Real images (ImageFolder,
400 px JPEGs, through the trainer): Pillow in 8 workers 1,852 img/s, in 14 workers 4,101; nvJPEG
(``input_path: nvjpeg``) 1,530 img/s. DALI (``input_path: dali``, the GPU default) is not measured yet.

Compile gains are kept per GPU model (``InstanceType.gpu_model`` of ``core.catalog.aws``): a stack's run is estimated
from its own GPU's figures where they exist, else from another GPU's, which ``bench plan`` names ("compile gain
measured on H100; none measured on V100"). A run's steady time estimated at the H100's rate is a lower bound on
slower GPUs (A100, V100, L4: compiling pays back sooner there, if its gain is similar) and an overestimate on an
H200 (p5e), where the rule may compile a run slightly too short to repay it.

Owed (no GPU measured it yet): ResNet-50's compile time (``COMPILE_S_ESTIMATE``: the first step's extra
time, which the trainer now reports as the ``compile`` start-up phase) and every figure for the other
workloads. Replace the estimate with a measured figure and its source when one is taken.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    which: the caller names it); None where no GPU has."""
    by_gpu = COMPILE_GAINS.get(workload, {})
    return by_gpu.get(gpu_model or "") or next(iter(by_gpu.values()), None)

# Real-image input paths measured feeding a workload on one H100, per workload: input path -> what was measured.
INPUT_RATES: dict[str, dict[str, str]] = {
    "resnet50": {"pillow": "Pillow in 8 workers 1,852 img/s, in 14 workers 4,101",
                 "nvjpeg": "nvJPEG (decode_jpeg) 1,530 img/s"},
}
INPUT_SOURCE = "one H100, 400 px JPEGs, against 4,932 img/s eager on synthetic data (2026-11)"
