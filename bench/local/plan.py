"""What ``bench run <stack> --local`` will run: the stack's experiments scaled down to this machine.

Pure functions (no processes, no clock, no torch): ``plan_local`` maps each ``Experiment``
through the stack's ``local`` section to a ``LocalExperiment`` whose node commands are the
same launcher + torchrun + ``workloads.train`` command lines the cluster Jobs run, only with
loopback rendezvous and smaller numbers: each experiment's ``TrainArgs`` start from the
cluster's (``workloads.launch.common.train_args_for``) and the evaluation command is the
cluster's (``launch.common.evaluation_argv``). ``bench.local.run`` executes the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

# What runs and how each framework starts (the pytorch node command included) live in bench.local.launch.
from bench.local.launch import (  # noqa: F401
    LOCAL_LAUNCHES,
    LocalExperiment,
    node_command,
    not_local,
    torchrun_command,
)
from bench.results.overview import nodes_text
from core.catalog.workload_facts import WORKLOADS
from core.config.gpu_defaults import compile_choice, trainer_input_path
from core.config.model import Experiment, LocalRun
from core.contract.names import EVAL_DIR
from workloads.launch.common import evaluation_argv, train_args_for
from workloads.train.common.cpu_choice import MIXED, CpuFacts, Measured
from workloads.train.common.cpu_choice import choose as choose_for_cpu
from workloads.train.pytorch.allreduce import message_sizes
from workloads.train.pytorch.precision_probe import shape_text
from workloads.train.pytorch.registry import WORKLOADS as TRAINER_CODE

STANDIN_DATASETS = ("cifar10",)  # catalog datasets the local run replaces with a generated stand-in
LOCAL_TEXT = "text-bytes"  # a language model's data here: the shipped byte-level text (datasets/text/)
CIFAR_STANDIN = {"train": 256, "test": 200}
# A collective workload's largest message here: processes share this machine's memory and cores,
# and loopback gloo says nothing about a fabric past this size anyway (--max-bytes in args overrides).
LOCAL_MAX_BYTES = 2**24


def default_run_id(now: datetime) -> str:
    """A UTC timestamp, e.g. ``20261122-083512``."""
    return now.strftime("%Y%m%d-%H%M%S")


def local_node_range(min_nodes: int, max_nodes: int, local_nodes: int) -> tuple[int, int]:
    """Map ``min:max`` onto at most ``local_nodes`` agents, keeping an elastic range elastic."""
    hi = min(max_nodes, local_nodes)
    if min_nodes == max_nodes:
        return hi, hi
    lo = max(1, math.ceil(min_nodes * hi / max_nodes))
    if hi > 1:
        lo = min(lo, hi - 1)
    return lo, hi


@dataclass(frozen=True)
class LocalPaths:
    """Where one local experiment reads data and writes results (a ``launch.common.TrainPaths``)."""
    datasets_dir: str
    results_dir: str

    def experiment_results_dir(self, experiment: Experiment) -> str:
        return self.results_dir


def scale_experiment(exp: Experiment, local: LocalRun, *, results_dir: str, data_dir: str,
                     gpu: bool = False, cpu: CpuFacts = CpuFacts()) -> LocalExperiment:
    """``exp`` scaled down by ``local``; on a CPU (``gpu`` false) with the precision and memory format
    that CPU runs fast (``workloads.train.common.cpu_choice``, from ``cpu``: this machine's facts)."""
    lo, hi = local_node_range(exp.min_nodes, exp.max_nodes, local.nodes)
    steps = min(exp.steps, local.steps) if exp.epochs == 0 else local.steps
    notes = []
    if exp.epochs:
        notes.append(f"{exp.epochs} epochs -> {steps} steps")
    dataset = local_dataset(exp, notes)
    # The cluster's arguments for this experiment (launch.common.train_args_for), scaled down.
    cluster = train_args_for(exp, LocalPaths(datasets_dir=data_dir, results_dir=results_dir))
    collective = WORKLOADS[exp.workload].collective
    precision, channels_last = exp.precision, cluster.channels_last
    if not gpu:
        # a language model has no convolutions: channels_last means nothing to it
        choice = choose_for_cpu(exp.precision, cluster.channels_last and not WORKLOADS[exp.workload].language_model,
                               cpu)
        precision, channels_last = choice.precision, choice.channels_last
        if not collective:  # an all-reduce sums float32 buffers: precision and memory format mean nothing to it
            notes.extend(choice.why)
    # Minutes-apart checkpoints never come in a short local run: checkpoint a third of the way
    # instead, so elastic restarts have something to resume from. A run the cluster does not
    # checkpoint (fixed-size synthetic) is not checkpointed here either: no checkpoint file at all.
    checkpointed = cluster.checkpoint_every > 0 or cluster.checkpoint_minutes > 0
    every = min(cluster.checkpoint_every or steps, max(1, steps // 3)) if checkpointed else 0
    max_bytes, extra = cluster.max_bytes, tuple(exp.args)
    if collective:
        # The cluster's size (a --max-bytes in args too) is for GPU memory and a fabric, not this machine.
        extra, dropped = without_flag(extra, "--max-bytes")
        max_bytes = min(max_bytes, LOCAL_MAX_BYTES)
        if max_bytes < cluster.max_bytes or dropped:
            notes.append(f"messages up to {size_text(max_bytes)} here: the cluster's "
                         f"{' '.join(dropped) or f'--max-bytes={cluster.max_bytes}'} is for its GPUs and fabric")
    train = replace(
        cluster, max_bytes=max_bytes, batch_size=min(exp.batch_size, local.batch_size), precision=precision, steps=steps, epochs=0,
        channels_last=channels_last, compile=bool(compile_choice(exp, gpu=gpu).value),
        input_path=trainer_input_path(exp, gpu=gpu),
        dataset=dataset, checkpoint_every=every, checkpoint_minutes=0.0,
        image_size=local.image_size, width_per_group=local.width_per_group,
        warmup_steps=max(1, min(10, steps // 6)), seed=0, workers=0, collective_timeout=120,
        log_every=max(1, min(cluster.log_every, steps // 10)), **language_model_scale(exp, local, notes))
    launch = LOCAL_LAUNCHES.get(exp.framework)
    procs = (launch and launch.procs_per_node) or min(exp.gpus_per_node, local.procs_per_node)
    devices, why_devices = devices_per_worker(exp, local, nodes=hi)
    notes.extend(why_devices)
    return LocalExperiment(
        name=exp.name, workload=exp.workload, min_nodes=lo, max_nodes=hi,
        procs_per_node=procs, train=train, extra_args=extra, pservers=min(exp.pservers, local.nodes) if launch and launch.pservers else 0,
        rdzv_backend=(launch and launch.rendezvous) or exp.rdzv_backend, max_restarts=exp.max_restarts,
        evaluate=exp.evaluate, results_dir=results_dir, notes=tuple(notes), skip=not_local(exp.framework),
        repeat=exp.repeat, repeats=exp.repeats, framework=exp.framework, devices_per_process=devices)


def local_dataset(exp: Experiment, notes: list[str]) -> str:
    """What ``exp`` trains on here, said in ``notes`` where it differs: a language model's text is the shipped one, a
    CIFAR-10 dataset a generated stand-in, any other real dataset synthetic tensors."""
    if exp.dataset == "synthetic":
        return exp.dataset
    if WORKLOADS[exp.workload].language_model:
        if exp.dataset != LOCAL_TEXT:
            notes.append(f"dataset {exp.dataset}: the shipped {LOCAL_TEXT} locally (same pre-tokenized layout)")
        return LOCAL_TEXT
    if exp.dataset in STANDIN_DATASETS:
        notes.append(f"dataset {exp.dataset}: generated stand-in, same layout "
                     f"({CIFAR_STANDIN['train']} train / {CIFAR_STANDIN['test']} test images)")
        return exp.dataset
    notes.append(f"dataset {exp.dataset}: synthetic tensors locally")
    return "synthetic"


def language_model_scale(exp: Experiment, local: LocalRun, notes: list[str]) -> dict[str, Any]:
    """A language model's shape here: ``local.model_size`` at ``local.seq_len`` (0: that shape's default), tensor
    parallelism only where a node's processes hold a whole group (else 1, said), validation every third of the run."""
    if not WORKLOADS[exp.workload].language_model:
        return {}
    procs = min(exp.gpus_per_node, local.procs_per_node)
    tp = exp.tensor_parallel if procs % exp.tensor_parallel == 0 else 1
    if tp != exp.tensor_parallel:
        notes.append(f"tensor_parallel {exp.tensor_parallel} -> 1: {procs} process(es) per node here")
    if exp.model_size != local.model_size:
        notes.append(f"model {exp.model_size} -> {local.model_size}")
    steps = min(exp.steps, local.steps) if exp.epochs == 0 else local.steps
    if exp.target_loss is not None:
        notes.append(f"target_loss {exp.target_loss:g} dropped: a loss of {local.model_size}'s byte-level vocabulary "
                     f"is not {exp.model_size}'s")
    return dict(model_size=local.model_size, seq_len=local.seq_len, tensor_parallel=tp,
                sharding=exp.sharding if local.nodes > 1 else "fsdp", val_every=max(1, steps // 3), target_loss=None)


def devices_per_worker(exp: Experiment, local: LocalRun, *, nodes: int) -> tuple[int, list[str]]:
    """TensorFlow's devices per worker here, and why where it matters: its one worker per node drives every GPU of
    the node on the cluster, so locally it mirrors over ``local.procs_per_node`` logical CPU devices (at most the
    node's GPUs), as the other frameworks run that many processes a node. TensorFlow mirrors over a device list in
    one worker only (``workloads.train.tensorflow.trainer.make_strategy``): a run of several nodes gets one each."""
    if exp.framework != "tensorflow":
        return 1, []
    wanted = min(exp.gpus_per_node, local.procs_per_node)
    if wanted > 1 and nodes > 1:
        return 1, [f"one device per worker here: TensorFlow mirrors over logical CPU devices in one worker only "
                   f"(the cluster's workers drive {exp.gpus_per_node} GPUs each)"]
    if wanted > 1:
        return wanted, [f"{wanted} logical CPU devices in its worker, as a pod's worker drives its node's GPUs"]
    return 1, []


def size_text(n: int) -> str:
    """8 B, 64 KiB, 16 MiB: a power-of-two message size as nccl-tests' users write it."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def setup_line(exp: LocalExperiment, *, gpu: bool) -> str:
    """How ``bench run --local`` introduces one experiment: its nodes and what it runs. A collective workload
    (all-reduce) is told by its message sizes, timed iterations and backend; a model by steps, batch and precision."""
    shape = nodes_text(exp)
    t = exp.train
    if WORKLOADS[exp.workload].collective:
        sizes = message_sizes(t.max_bytes) or [t.max_bytes]
        what = (f"messages {size_text(sizes[0])} to {size_text(sizes[-1])} ({len(sizes)} sizes), {t.steps} timed "
                f"iterations per size, {'nccl' if gpu else 'gloo over loopback'}")
    else:
        what = f"{t.steps} steps, batch {t.batch_size}, {t.precision}"
    devices = f" x {exp.devices_per_process} devices" if exp.devices_per_process > 1 else ""
    return (f"{exp.label}: {exp.workload}, nodes {shape} x {exp.procs_per_node} proc{devices}, {what}, "
            f"rendezvous {exp.rdzv_backend}" + (f" -- SKIPPED: {exp.skip}" if exp.skip else ""))


def without_flag(args: Sequence[str], flag: str) -> tuple[tuple[str, ...], list[str]]:
    """``args`` without ``flag=V`` or ``flag V``, and what was taken out."""
    kept: list[str] = []
    dropped: list[str] = []
    it = iter(args)
    for a in it:
        if a.startswith(flag + "="):
            dropped.append(a)
        elif a == flag:
            dropped += [a, next(it, "")]
        else:
            kept.append(a)
    return tuple(kept), dropped


def plan_local(experiments: Sequence[Experiment], local: LocalRun, *, run_dir: Path,
               only: str | None = None, gpu: bool = False, cpu: CpuFacts = CpuFacts(),
               measured: Mapping[str, Measured] | None = None) -> list[LocalExperiment]:
    """Each run of each experiment (``Experiment.runs``: itself, or its repeats in order), scaled down;
    a repeat's results go to ``<experiment>/repeat_<k>/`` as on the cluster (``Experiment.results_path``).
    ``measured``: step times on this CPU by ``probe_shape`` (bench.local.precision_probe), where timed."""
    data_dir = str(run_dir / "_data")
    return [scale_experiment(run, local, results_dir=str(run_dir / run.results_path), data_dir=data_dir, gpu=gpu,
                             cpu=replace(cpu, measured=(measured or {}).get(probe_shape(run, local) or "")))
            for e in experiments if only is None or e.name == only for run in e.runs()]


def probe_shape(exp: Experiment, local: LocalRun) -> str | None:
    """The model shape whose fp32 and bf16 step times decide a mixed-precision experiment's precision here
    (``workloads.train.pytorch.precision_probe``): a PyTorch classifier at the local scale; None for the rest."""
    if exp.framework != "pytorch" or exp.precision not in MIXED or WORKLOADS[exp.workload].collective:
        return None
    if TRAINER_CODE[exp.workload].model is None:
        return None
    return shape_text(exp.workload, local.image_size, local.width_per_group, min(exp.batch_size, local.batch_size))


def with_rendezvous(exp: LocalExperiment, *, etcd_available: bool) -> LocalExperiment:
    """etcd-v2 needs an etcd binary; without one, fall back to c10d (and say so)."""
    if exp.rdzv_backend == "etcd-v2" and not etcd_available:
        return replace(exp, rdzv_backend="c10d", notes=exp.notes + ("no etcd on PATH: c10d rendezvous",))
    return exp


def evaluation_dir(exp: LocalExperiment) -> Path:
    """``<experiment>/eval/``: where the cluster's evaluation Job writes too (core.contract.names.EVAL_DIR)."""
    return Path(exp.results_dir) / EVAL_DIR


def evaluate_command(exp: LocalExperiment, *, python: str) -> list[str]:
    """The cluster's evaluation command (launch.common.evaluation_argv) on this experiment's results."""
    return [python, *evaluation_argv(exp.workload, results_dir=exp.results_dir, data_dir=exp.train.data_dir)]


def threads_per_process(cpus: int, processes: int) -> int:
    return max(1, cpus // max(1, processes))


def processes_sharing_cores(plan: Sequence[LocalExperiment], mode: str) -> int:
    """How many processes share the cores at most: the largest experiment's when they run in turn, else all."""
    runnable = [e for e in plan if not e.skip]
    return (max((e.processes for e in runnable), default=1) if mode == "sequential"
            else sum(e.processes for e in runnable))


def execution_mode(requested: str, cpus: int, experiments: Sequence[LocalExperiment]) -> tuple[str, str]:
    """(mode, why): run in parallel only when there is a core for every process of every experiment."""
    procs = sum(e.processes for e in experiments if not e.skip and e.repeat <= 1)  # repeats run in turn
    if requested == "parallel" and procs > cpus and len(experiments) > 1:
        return "sequential", f"stack says parallel; running sequentially here ({cpus} CPU cores for {procs} processes)"
    return requested, f"{requested} (stack setting)"
