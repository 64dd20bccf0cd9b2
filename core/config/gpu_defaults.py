"""What an experiment's GPU run defaults to where its stack file does not say: whether it compiles, and which
input path feeds it, each with the reason ``bench plan`` prints. Pure: no torch, no I/O.

Compile. ``compile: true`` or ``false`` in the stack file wins. Unset, the run compiles only where compiling
pays back within it: on a GPU, for a PyTorch workload with a measured compile gain
(``core.catalog.gpu_rates``), on synthetic data (on real images the input path, not the model, sets the step
rate: every real-image path measured on an H100 ran below the eager rate), when the time compiling saves over the
run's steady steps (estimated at the stack's own GPU's eager rate: measured here, else NVIDIA's published figure
for that GPU, never another GPU's; eager where there is none) is at least the compile time;
that is, when the steady time is at least ``payback_factor`` (about 6 for ResNet-50) times the compile time. A
CPU run (``bench run --local``) never compiles unless asked: Inductor takes minutes there.

Input path. ``input_path`` in the stack file wins. Unset (``auto``), a PyTorch workload reading an ImageFolder
decodes with NVIDIA DALI on a GPU (the crop decoded on the GPU, host cores only read files: the Pillow path,
measured at 1,852 img/s in 8 workers on an H100, starves it) and with Pillow on a CPU. A DALI that fails to
install or import fails the run at its start, naming why: a silent fallback would measure another pipeline
under the same name (``input_path: pillow`` asks for Pillow on a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.catalog.aws import INSTANCE_TYPES
from core.catalog.gpu_rates import COMPILE_GAINS, INPUT_RATES, INPUT_SOURCE, compile_gain, eager_rate
from core.catalog.scaling_anchors import ANCHORS as SCALING_ANCHORS
from core.catalog.workload_facts import WORKLOADS
from core.config.model import Experiment
from core.contract.train_args import INPUT_PATHS as TRAINER_INPUT_PATHS

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
    "nvjpeg": "nvJPEG through torchvision.io.decode_jpeg",
    "dali": "NVIDIA DALI on the device",
    "cifar_memory": "CIFAR-10 arrays in host memory",
    "tokens": "pre-tokenized shards through memory maps",
    "framework": "the framework's own input pipeline",
    "none": "no input",
}
# What each ImageFolder path does, where (GPU, CPU).
_JPEG_PATHS = {
    "pillow": ("{by} decode and augment the JPEGs with Pillow on host cores",) * 2,
    "nvjpeg": ("{by} read the JPEG bytes, the GPU decodes them (nvJPEG, torchvision.io.decode_jpeg) and crops per "
               "image on the training thread",
               "{by} read the JPEG bytes, decode_jpeg decodes them on the CPU (no GPU here)"),
    "dali": ("DALI decodes each image's random crop on the GPU (nvJPEG, its hardware decoder where it has one), then "
             "resizes, flips and normalises there; host cores only read files (NVIDIA's ResNet-50 input path)",
             "DALI decodes and augments on CPU threads (no GPU here)"),
}


@dataclass(frozen=True)
class Choice:
    value: bool | str
    reason: str


def reads_image_folder(e: Experiment) -> bool:
    """Whether ``e``'s trainer decodes an ImageFolder's JPEGs (where ``input_path`` applies): a PyTorch trainer, a
    workload that reads ImageFolders, real data."""
    facts = WORKLOADS.get(e.workload)
    return e.framework in TORCH_FRAMEWORKS and facts is not None and facts.image_folder and e.dataset != "synthetic"


def steady_samples_per_gpu(e: Experiment) -> float:
    """Samples one GPU trains in the run: steps x batch, or for an epoch run its epochs of the workload's
    dataset size (ImageNet's for ResNet-50) shared by the largest world."""
    if e.epochs:
        samples = WORKLOADS[e.workload].epoch_samples or 0
        return e.epochs * samples / max(1, e.max_nodes * e.gpus_per_node)
    return float(e.steps * e.batch_size)


def compile_choice(e: Experiment, *, gpu: bool, instance_type: str | None = None) -> Choice:
    """Whether ``e`` compiles on a GPU (``gpu``) or a CPU, and why; ``instance_type``: its node group's, whose GPU's
    measured figures the estimate uses where the catalog has them (None: a GPU the plan cannot name)."""
    if e.compile is not None:
        return Choice(e.compile, f"compile: {'true' if e.compile else 'false'} in the stack file")
    if e.framework not in TORCH_FRAMEWORKS:
        return Choice(False, f"torch.compile is PyTorch's; {e.framework} runs its own graph")
    if not gpu:
        return Choice(False, "a CPU run: compiling takes minutes there (compile: true to force it)")
    if WORKLOADS[e.workload].language_model:
        return Choice(True, "a language model compiles each block on a GPU (TorchTitan's recipes; 8B on 8 H100: "
                            "5,762 tokens/s/GPU eager, 6,667 compiled, core/catalog/llm_anchors.py); compile: false "
                            "for eager")
    model = (INSTANCE_TYPES[instance_type].gpu_model or None) if instance_type in INSTANCE_TYPES else None
    gain = compile_gain(e.workload, model)
    if gain is None:
        why = NO_GAIN.get(e.workload, f"no measured compile gain for {e.workload} on a GPU yet")
        return Choice(False, f"{why}; eager unless compile: true")
    if e.dataset != "synthetic":
        rates = INPUT_RATES.get(e.workload, {})
        fed = input_path(e, gpu=True, workers=0).value
        unmeasured = f"; {fed} is not measured yet, so eager until a GPU shows it keeps up" if fed not in rates \
            else ""
        return Choice(False, "real images: the input path sets the step rate, compiling the model gains nothing "
                             f"(measured: {'; '.join(rates.values()) + '; ' if rates else ''}{INPUT_SOURCE}"
                             f"{unmeasured})")
    rate = eager_rate(e.workload, model, e.precision)
    if rate is None:  # never another GPU's rate: an H100's would make a V100's run look four times shorter
        return Choice(False, _no_rate(e, model))
    steady = steady_samples_per_gpu(e) / rate.per_s
    saved = steady * (1 - gain.eager_per_s / gain.compiled_per_s)
    pays = saved >= gain.compile_s
    estimate = "" if gain.compile_s_measured else " (an estimate; the measured figure is owed)"
    compiled = f"{gain.compiled_per_s:,.0f} img/s" if model in (None, gain.gpu) else \
        f"{gain.compiled_per_s / gain.eager_per_s:.2f} x eager: compile gain measured on {gain.gpu}; none measured " \
        f"on {model}"
    return Choice(pays, f"~{steady / 60:.1f} min of steady steps eager at {rate.per_s:,.0f} img/s "
                        f"({rate.source}); compiling ({compiled}) would save ~{saved:.0f} s against "
                        f"~{gain.compile_s:.0f} s to compile{estimate}: "
                        + ("pays back" if pays else "does not pay back")
                        + f" (needs >= {gain.payback_factor:.1f} x the compile time of steady steps)")


def _no_rate(e: Experiment, model: str | None) -> str:
    """Why a run on a GPU with no rate of its own for its workload stays eager: which GPUs have one."""
    rows = [a for a in SCALING_ANCHORS if a.workload == e.workload]
    published = (f"{' and '.join(dict.fromkeys(a.precision for a in rows))} on "
                 f"{', '.join(dict.fromkeys(a.gpu_model for a in rows))}" if rows else "none")
    measured = ", ".join(COMPILE_GAINS.get(e.workload, {})) or "none"
    return (f"no {e.workload} rate on {model} in {e.precision} (measured on {measured}; NVIDIA publishes {published}), "
            "so the time compiling would save is unknown; eager unless compile: true")


def input_path(e: Experiment, *, gpu: bool, workers: int) -> Choice:
    """Which input path feeds ``e``'s trainer (one of ``INPUT_PATHS``) and why; ``workers``: its DataLoader
    workers per process (``workloads.launch.common.loader_workers``; 0 = in the training process)."""
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
    if facts is not None and facts.language_model:
        return Choice("tokens", f"{e.dataset}: pre-tokenized shards read through memory maps, one slice of windows "
                                "a step (workloads/train/common/tokens.py): no decode, no loader workers")
    if facts is not None and facts.in_memory_data:
        copy = "page-locked, copied without a host sync" if gpu else "used in place"
        return Choice("cifar_memory", f"cropped and flipped on the training thread, {copy}")
    if not reads_image_folder(e):
        return Choice("pillow", f"{e.dataset}: {by} decode and augment the JPEGs on host cores (the workload's own "
                                "loader)")
    if e.input_path != "auto":
        chosen, why = e.input_path, f"input_path: {e.input_path} in the stack file"
    elif gpu:
        chosen, why = "dali", "the GPU default for ImageFolder data"
    else:
        chosen, why = "pillow", "the CPU default (decoding on the GPU needs one)"
    what = _JPEG_PATHS[chosen][0 if gpu else 1].format(by=by[0].upper() + by[1:])
    measured = f" ({rates[chosen]}, {INPUT_SOURCE})" if chosen in rates else \
        (" (its rate on a GPU is owed a measurement)" if gpu else "")
    return Choice(chosen, f"{why}: {what}{measured}")


# EFA pods whose trainer forks DataLoader workers: libfabric's EFA provider maps its buffers with huge pages
# (core.catalog.fabric), and a fork after NCCL started fails with "OSError: Cannot allocate memory" when the node's
# huge pages run out; FI_EFA_FORK_SAFE does nothing on kernels 5.15 and later. AWS's remedy:
# FI_EFA_USE_HUGE_PAGE=0, "a minor performance hit" (aws-ofi-nccl doc/efa-env-var.md, PR #292; aws-ofi-nccl#179 on
# p4d; awsome-distributed-training 1.architectures/efa-cheatsheet.md). Spawned workers would avoid the fork, but
# each would unpickle the dataset's file list (ImageNet's 1.28 M paths) at every start.
EFA_FORK_NOTE = ("EFA without huge pages (FI_EFA_USE_HUGE_PAGE=0): its loader forks worker processes after NCCL "
                 "mapped libfabric's huge-page buffers, and such a fork can fail with ENOMEM (aws-ofi-nccl "
                 "doc/efa-env-var.md, #179); checked only on EFA hardware, which the offline tests do not have")


def forks_loader_workers(e: Experiment) -> bool:
    """Whether ``e``'s trainer forks DataLoader worker processes on its GPU nodes: the Pillow and nvJPEG paths and
    Mask R-CNN's COCO loader do; DALI starts its reader processes by spawn; synthetic and in-memory data, and the
    other frameworks' own pipelines (threads), start none."""
    return e.framework in TORCH_FRAMEWORKS and input_path(e, gpu=True, workers=1).value in ("pillow", "nvjpeg")


def trainer_input_path(e: Experiment, *, gpu: bool) -> str:
    """``input_path``'s choice as the trainer's ``--input-path`` (pillow, nvjpeg or dali; pillow where it reads no
    ImageFolder, which ignores it)."""
    chosen = input_path(e, gpu=gpu, workers=0).value
    return chosen if chosen in TRAINER_INPUT_PATHS else "pillow"
