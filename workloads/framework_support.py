"""Which experiments can run at all: framework, workload, image and option pairs that work together, and the
framework's training entry point among the shipped files. The program calls both checks once, before it
registers anything; the config parser prefixes each message with ``experiments[i].``.

Pure functions (no Pulumi, no I/O). Frameworks and their reasoning: workloads/README.md.
"""

from __future__ import annotations

from typing import Mapping

from core.catalog import compat, pins
from core.catalog.aws import DEFAULT_REGION
from core.catalog.workload_facts import WORKLOADS
from core.config.gpu_defaults import TORCH_FRAMEWORKS, reads_image_folder
from core.config.model import Experiment
from core.contract.launch_command import ENTRY_MODULES

# Which workloads each framework's training path implements.
SUPPORTED = {
    "pytorch": ("resnet50", "cifar10", "maskrcnn", "allreduce", "llama3"),
    "horovod": ("resnet50", "cifar10"),
    "tensorflow": ("resnet50", "cifar10"),
    "paddle": ("resnet50", "cifar10"),
}
# Why a framework does not run a language model (llama3): its trainer has none.
NO_LANGUAGE_MODEL = {
    "tensorflow": "its trainer (workloads/train/tensorflow) has no language model: Llama 3 is built and sharded with "
                  "PyTorch's FSDP2 and DTensor",
    "horovod": "its trainer is the PyTorch image trainer under Horovod's all-reduce, with no language model and no "
               "FSDP2 or tensor parallelism",
    "paddle": "its trainer (workloads/train/paddle) has no language model",
}
IMAGE_EXAMPLES = {
    "pytorch": pins.TRAINING_IMAGE,
    "tensorflow": pins.training_image(DEFAULT_REGION, pins.TF_DLC_TAG, pins.TF_DLC_REPOSITORY),
    "horovod": pins.horovod_image("<account>", "<region>"),  # no DLC has Horovod: workloads/Dockerfile.horovod
    "paddle": pins.PADDLE_IMAGE,
}
IMAGE_HOW = {"horovod": " (no AWS Deep Learning Container has Horovod since PyTorch 2.0.1): build "
                        "workloads/Dockerfile.horovod (--build-arg BASE_TAG for V100 groups), push it to the "
                        "home stack's repository and set image"}


def check_experiment(e: Experiment) -> list[str]:
    """Problems with framework/workload/option pairs, one message each, keys relative to the experiment.

    The config parser prefixes them with ``experiments[i].``.
    """
    out = []
    supported = SUPPORTED.get(e.framework, ())
    if e.workload not in supported:
        ok = [f for f, w in SUPPORTED.items() if e.workload in w]
        lm = e.workload in WORKLOADS and WORKLOADS[e.workload].language_model
        why = f": {NO_LANGUAGE_MODEL[e.framework]}" if lm and e.framework in NO_LANGUAGE_MODEL else ""
        out.append(f'framework="{e.framework}": does not run workload "{e.workload}" (supported: '
                   f'{", ".join(supported) or "none"}){why}; use framework {", ".join(ok)}, e.g. "pytorch"')
    if e.framework != "pytorch" and e.elastic:
        out.append(f'nodes="{e.min_nodes}:{e.max_nodes}": elastic runs need framework "pytorch" (torchrun); '
                   f'{e.framework} needs a fixed node count, e.g. {e.max_nodes}')
    row = compat.find_image(e.image)  # an image of the compatibility table: its framework is known
    if row is not None and row.framework != e.framework:
        out.append(f'image="{e.image}": a {row.framework} image; framework "{e.framework}" needs an image that has '
                   f'it installed{IMAGE_HOW.get(e.framework, "")}, e.g. "{IMAGE_EXAMPLES[e.framework]}"')
    evaluated = [w for w, facts in WORKLOADS.items() if facts.evaluates]
    if e.evaluate and (e.framework != "pytorch" or e.workload not in evaluated):
        out.append(f'evaluate=true: evaluation exists for workload "{", ".join(evaluated)}" with framework '
                   f'"pytorch" only (here {e.workload}/{e.framework}); remove it, e.g. evaluate: false')
    if e.evaluate and not e.checkpoint_every and not e.checkpoint_minutes:
        out.append("evaluate=true: the evaluation reads the checkpoint training leaves, and checkpoint_every=0 with "
                   "checkpoint_minutes=0 keeps none; set one, e.g. checkpoint_minutes: 10")
    if e.compile and e.framework not in TORCH_FRAMEWORKS:
        out.append(f'compile=true: torch.compile applies to PyTorch code, not {e.framework}; e.g. compile: false')
    if e.input_path != "auto" and not reads_image_folder(e):
        out.append(f'input_path="{e.input_path}": chooses how a PyTorch trainer decodes an ImageFolder\'s JPEGs, and '
                   f'{e.workload}/{e.framework} on dataset "{e.dataset}" reads none; e.g. input_path: "auto"')
    if e.fabric == "strict" and e.framework != "pytorch":
        out.append(f'fabric="strict": judges NCCL\'s transport in PyTorch runs only (here {e.framework}); '
                   f'e.g. fabric: "check"')
    if e.workload in WORKLOADS and WORKLOADS[e.workload].collective and e.max_nodes * e.gpus_per_node < 2:
        out.append(f'nodes={e.max_nodes}: workload "{e.workload}" times a collective between processes and needs at '
                   f'least 2 (nodes x gpus_per_node = {e.max_nodes * e.gpus_per_node}); e.g. nodes: 2')
    datasets = WORKLOADS[e.workload].datasets if e.workload in WORKLOADS else ()
    if e.dataset not in datasets:
        out.append(f'dataset="{e.dataset}": workload "{e.workload}" trains on {", ".join(datasets)}; '
                   f'e.g. dataset: "{datasets[0]}"')
    return out


def entry_file(framework: str) -> str:
    """The file (relative to the repository root, as shipped) that ``python -m`` runs for ``framework``."""
    module = ENTRY_MODULES[framework]
    return f"{module.replace('.', '/')}/__main__.py"


def missing_entry_points(experiments: tuple[Experiment, ...], code_files: Mapping[str, str]) -> list[str]:
    """Experiments whose framework has no training entry point among the shipped files."""
    return [f'experiments[{i}].framework="{e.framework}": workloads/train has no {e.framework} entry point '
            f'({entry_file(e.framework)}, module {ENTRY_MODULES[e.framework]}); use "pytorch" or add it'
            for i, e in enumerate(experiments) if entry_file(e.framework) not in code_files]
