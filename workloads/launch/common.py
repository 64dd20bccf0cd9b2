"""The launch shape every framework shares: a ``Launch`` (what the results launcher runs in every pod of one
Indexed Job, the env they share and a shell prelude that derives the per-pod part from ``JOB_COMPLETION_INDEX``,
which only exists at run time), and the trainer's arguments for an experiment (``train_args_for``: one
``core.contract.train_args.TrainArgs``, also the start of ``eksbench run --local``) and the evaluation's.

Pure functions (no Pulumi, no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol

from core.catalog import aws as catalog
from core.catalog import compat, pins
from core.catalog.workload_facts import WORKLOADS
from core.config.gpu_defaults import compile_choice, trainer_input_path
from core.config.model import Experiment
from core.contract.launch_command import ENTRY_MODULES, Launched, launched_trainer, trainer_argv
from core.contract.names import CHECKPOINT_FILE, EVAL_DIR
from core.contract.train_args import TrainArgs
from infra.environment import Environment

CODE_ROOT = "/opt/eksbench"  # PYTHONPATH; the shipped code (core/, workloads/train/) is mounted here

# What the results launcher imports in every training pod: boto3 to upload, pynvml to sample the GPUs
# (workloads.train.harness.telemetry; no DLC promises it, and without it a run has no GPU telemetry).
LAUNCHER_MODULES = ("boto3", "pynvml")

# A collective that waits longer than this fails the step (NCCL watchdog), so survivors of a lost
# node stop within minutes instead of NCCL's 10 and torchrun can restart the group. It must stay
# above the longest legitimate wait: rank 0's checkpoint snapshot, an epoch's evaluation, and the
# first step's torch.compile on the slowest rank (max-autotune can take minutes).
CLUSTER_COLLECTIVE_TIMEOUT_S = 300


@dataclass(frozen=True)
class Launch:
    """What one framework needs in every pod of the training Job."""
    argv: tuple[str, ...]  # what workloads.train.harness.launch runs after "--"
    env: Mapping[str, str] = field(default_factory=dict)  # the same in every pod
    prelude: str = ""  # shell run first; may read $JOB_COMPLETION_INDEX
    port: int | None = None  # where peers reach a pod through the headless Service
    modules: tuple[str, ...] = LAUNCHER_MODULES  # imported by the launcher/rendezvous; pip-installed if missing
    pins: Mapping[str, str] = field(default_factory=lambda: dict(pins.PIP_PINS))  # module -> what pip installs
    launched: Launched = Launched()  # what the launcher records beside argv (torchrun's shape, the trainer's args)


class TrainPaths(Protocol):
    """Where an experiment reads data and writes results: the cluster's ``Environment``, or the local runner's."""
    datasets_dir: str

    def experiment_results_dir(self, experiment: Experiment) -> str: ...


def loader_workers(instance_type: str | None, gpus_per_node: int) -> int:
    """DataLoader workers per process from the instance's vCPUs per GPU: the 75% share the pod
    requests (pod_manifests._requests), less one core for the training process itself."""
    spec = catalog.INSTANCE_TYPES.get(instance_type or "")
    if spec is None or not spec.gpus:
        return TrainArgs().workers
    per_gpu = spec.vcpus / spec.gpus
    return max(1, int(per_gpu * 0.75) - 1)


def checkpoint_policy(e: Experiment) -> tuple[int, float]:
    """(checkpoint_every, checkpoint_minutes). A fixed-size synthetic run is a throughput
    measurement: both 0, so it writes no checkpoint at all (workloads.train.pytorch.checkpoint.enabled).
    Elastic runs and real data checkpoint every ``checkpoint_minutes`` and/or ``checkpoint_every``
    steps, and at the end (an evaluated run's weights: evaluate needs real data, so never both 0 here)."""
    if e.dataset == "synthetic" and not e.elastic:
        return 0, 0.0
    return e.checkpoint_every, e.checkpoint_minutes


def compiles(e: Experiment, instance_type: str | None = None) -> bool:
    """Whether the cluster's run of ``e`` (on GPUs of ``instance_type``, its node group's) compiles its model: the
    stack file's ``compile``, else the GPU default's rule (core.config.gpu_defaults.compile_choice, which ``eksbench
    plan`` prints with its reason)."""
    return bool(compile_choice(e, gpu=True, instance_type=instance_type).value)


def jpeg_input(e: Experiment) -> str:
    """How the cluster's run of ``e`` (on GPUs) decodes an ImageFolder's JPEGs (TrainArgs.input_path): the stack
    file's ``input_path``, else the GPU default (core.config.gpu_defaults.input_path, which ``eksbench plan`` prints)."""
    return trainer_input_path(e, gpu=True)


def image_pins(e: Experiment) -> dict[str, str]:
    """What pip installs in ``e``'s pods for a module its image lacks: DALI's wheel for the image's CUDA."""
    row = compat.find_image(e.image) or compat.find_image(pins.TRAINING_IMAGE)  # unknown: the pinned DLC's CUDA
    return {**pins.PIP_PINS, pins.DALI_MODULE: pins.dali_pin(row.cuda)}


def trainer_modules(e: Experiment, base: tuple[str, ...]) -> tuple[str, ...]:
    """``base`` and, where the trainer decodes with DALI, DALI; where it trains in float8, torchao (no DLC has
    either)."""
    return (base + ((pins.DALI_MODULE,) if jpeg_input(e) == "dali" else ())
            + ((pins.FLOAT8_MODULE,) if e.precision == "fp8" else ()))


def train_args_for(e: Experiment, env: TrainPaths, *, instance_type: str | None = None) -> TrainArgs:
    """The experiment as the trainer's arguments; what an experiment does not set keeps TrainArgs' default.

    ``instance_type``: the experiment's node group's, for the loader workers per process.
    """
    every, minutes = checkpoint_policy(e)
    return TrainArgs(workload=e.workload, batch_size=e.batch_size, precision=e.precision, steps=e.steps,
                     epochs=e.epochs, dataset=e.dataset,
                     data_dir=env.datasets_dir,  # the dataset is a folder under it
                     results_dir=env.experiment_results_dir(e), checkpoint_every=every, checkpoint_minutes=minutes,
                     image_size=WORKLOADS[e.workload].image_size, channels_last=e.channels_last,
                     compile=compiles(e, instance_type), compile_mode=e.compile_mode,
                     target_accuracy=e.target_accuracy, input_path=jpeg_input(e),
                     workers=loader_workers(instance_type, e.gpus_per_node),
                     collective_timeout=CLUSTER_COLLECTIVE_TIMEOUT_S, **language_model_args(e))


def language_model_args(e: Experiment) -> dict:
    """A language model's trainer arguments (TrainArgs' llama3 fields) from its keys; none for other workloads, whose
    argv then spells none of them."""
    if not WORKLOADS[e.workload].language_model:
        return {}
    return dict(model_size=e.model_size, seq_len=e.seq_len or 0, tensor_parallel=e.tensor_parallel,
                sharding=e.sharding, activation_checkpoint=e.activation_checkpoint, fp8_recipe=e.fp8_recipe,
                val_every=e.val_every, target_loss=e.target_loss)


def train_argv(e: Experiment, env: Environment, *, instance_type: str | None = None) -> tuple[str, ...]:
    """``-m <entry module>`` and its arguments (the trainers' CLI contract, core.contract.train_args, for every
    framework); the experiment's own ``args`` come last, so they win."""
    return trainer_argv(train_args_for(e, env, instance_type=instance_type), e.args,
                        module=ENTRY_MODULES[e.framework])


def entry_command(e: Experiment, env: Environment, *, nodes: int, procs_per_node: int,
                  prefix: tuple[str, ...] = ("python3",)) -> tuple[tuple[str, ...], Launched]:
    """``prefix`` + ``train_argv``, and the Launched the launcher records (``nodes`` x ``procs_per_node``)."""
    return prefix + train_argv(e, env), launched_trainer(nodes=nodes, procs_per_node=procs_per_node,
                                                         args=train_args_for(e, env), extra=e.args)


def evaluation_argv(workload: str, *, results_dir: str, data_dir: str) -> tuple[str, ...]:
    """``-m workloads.train.pytorch.evaluate`` and its arguments: the checkpoint training left in ``results_dir``
    (CHECKPOINT_FILE), evaluated into ``<results_dir>/<EVAL_DIR>``."""
    return ("-m", "workloads.train.pytorch.evaluate", "--workload", workload, "--checkpoint",
            f"{results_dir}/{CHECKPOINT_FILE}", "--data-dir", data_dir, "--results-dir", f"{results_dir}/{EVAL_DIR}")
