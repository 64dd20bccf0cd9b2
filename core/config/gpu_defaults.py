"""What an experiment's GPU run defaults to where its stack file does not say: whether it compiles, and which
input path feeds it, each with the reason ``bench plan`` prints. Pure: no torch, no I/O.

Compile. ``compile: true`` or ``false`` in the stack file wins. Unset, the run compiles only where compiling
pays back within it: on a GPU, for a PyTorch workload with a measured compile gain
(``core.catalog.gpu_rates``), on synthetic data (on real images the input path, not the model, sets the step
rate: every real-image path measured on an H100 ran below the eager rate), when the time compiling saves over the
run's steady steps (estimated at the H100's eager rate, a lower bound on other GPUs) is at least the compile
time; that is, when the steady time is at least ``payback_factor`` (about 6 for ResNet-50) times the compile
time. A CPU run (``bench run --local``) never compiles unless asked: Inductor takes minutes there.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.catalog.gpu_rates import COMPILE_GAINS, INPUT_RATES, INPUT_SOURCE
from core.catalog.workload_facts import WORKLOADS
from core.config.model import Experiment

TORCH_FRAMEWORKS = ("pytorch", "horovod")  # the frameworks whose trainer is workloads.train.pytorch.trainer
# Why a workload without a measured gain stays eager.
NO_GAIN = {
    "maskrcnn": "Mask R-CNN's images and proposals change shape every step: torch.compile would recompile",
    "allreduce": "no model to compile (a collective)",
}

# The input paths (``input_path``): what each name means.
INPUT_PATHS = {
    "synthetic": "synthetic tensors on the device",
    "pillow": "Pillow in DataLoader workers",
    "gpu_decode": "nvJPEG on the GPU (gpu_decode)",
    "cifar_memory": "CIFAR-10 arrays in host memory",
    "framework": "the framework's own input pipeline",
    "none": "no input",
}


@dataclass(frozen=True)
class Choice:
    value: bool | str
    reason: str


def steady_samples_per_gpu(e: Experiment) -> float:
    """Samples one GPU trains in the run: steps x batch, or for an epoch run its epochs of the workload's
    dataset size (ImageNet's for ResNet-50) shared by the largest world."""
    if e.epochs:
        samples = WORKLOADS[e.workload].epoch_samples or 0
        return e.epochs * samples / max(1, e.max_nodes * e.gpus_per_node)
    return float(e.steps * e.batch_size)


def compile_choice(e: Experiment, *, gpu: bool) -> Choice:
    """Whether ``e`` compiles on a GPU (``gpu``) or a CPU, and why."""
    if e.compile is not None:
        return Choice(e.compile, f"compile: {'true' if e.compile else 'false'} in the stack file")
    if e.framework not in TORCH_FRAMEWORKS:
        return Choice(False, f"torch.compile is PyTorch's; {e.framework} runs its own graph")
    if not gpu:
        return Choice(False, "a CPU run: compiling takes minutes there (compile: true to force it)")
    gain = COMPILE_GAINS.get(e.workload)
    if gain is None:
        why = NO_GAIN.get(e.workload, f"no measured compile gain for {e.workload} on a GPU yet")
        return Choice(False, f"{why}; eager unless compile: true")
    if e.dataset != "synthetic":
        rates = "; ".join(INPUT_RATES.get(e.workload, {}).values())
        return Choice(False, "real images: the input path sets the step rate, compiling the model gains "
                             f"nothing ({rates + '; ' if rates else ''}{INPUT_SOURCE})")
    steady = steady_samples_per_gpu(e) / gain.eager_per_s
    saved = steady * (1 - gain.eager_per_s / gain.compiled_per_s)
    pays = saved >= gain.compile_s
    estimate = "" if gain.compile_s_measured else " (an estimate; the measured figure is owed)"
    return Choice(pays, f"~{steady / 60:.1f} min of steady steps eager at {gain.eager_per_s:,.0f} img/s (H100); "
                        f"compiling ({gain.compiled_per_s:,.0f} img/s) would save ~{saved:.0f} s against "
                        f"~{gain.compile_s:.0f} s to compile{estimate}: "
                        + ("pays back" if pays else "does not pay back")
                        + f" (needs >= {gain.payback_factor:.1f} x the compile time of steady steps)")


def input_path(e: Experiment, *, gpu: bool, workers: int) -> Choice:
    """Which input path feeds ``e``'s trainer (one of ``INPUT_PATHS``) and why; ``workers``: its DataLoader
    workers per process (``workloads.contracts.loader_workers``; 0 = in the training process)."""
    device = "GPU" if gpu else "CPU"
    by = f"{workers} workers per process" if workers else "the training process"
    facts = WORKLOADS.get(e.workload)
    if facts is not None and facts.collective:
        return Choice("none", "a collective on buffers it fills itself")
    if e.dataset == "synthetic":
        return Choice("synthetic", f"one random batch, made once and kept on the {device}: no input cost")
    if e.framework not in TORCH_FRAMEWORKS:
        return Choice("framework", f"{e.framework}'s trainer reads {e.dataset} with its own")
    rates = INPUT_RATES.get(e.workload, {})
    if facts is not None and facts.in_memory_data:
        copy = "page-locked, copied without a host sync" if gpu else "used in place"
        return Choice("cifar_memory", f"cropped and flipped on the training thread, {copy}")
    if e.gpu_decode and facts is not None and facts.image_folder:
        where = "the GPU decodes (nvJPEG, torchvision.io.decode_jpeg)" if gpu else \
            "decode_jpeg decodes on the CPU (no GPU here)"
        return Choice("gpu_decode", f"gpu_decode: true: {by} read the JPEG bytes, {where} and crops per image on "
                                    "the training thread" + (f" ({rates['gpu_decode']}, {INPUT_SOURCE})"
                                                             if "gpu_decode" in rates else ""))
    measured = f" ({rates['pillow']}, {INPUT_SOURCE})" if "pillow" in rates else ""
    return Choice("pillow", f"{e.dataset}: {by} decode and augment the JPEGs on host cores{measured}")
