"""The one builder of the commands that start training: the results launcher, torchrun, the trainer.

The cluster's Jobs (``workloads.contracts``, ``workloads.pod_script``) and the local run
(``bench.local_plan``) both build their command lines here, so a flag is spelled once. torchrun's
flags are spelled with underscores, which every torch the images carry accepts (the dashed
aliases are newer; torch/distributed/run.py ``get_args_parser`` lists both for each flag).

The launcher (``workloads.train.launch``) reads the command it wraps back through
``launched_shape`` and ``launched_train_args``, the inverses of the builders below, so the
summary records the launch shape and the trainer's arguments from this module's spelling
alone (``bench.results`` reads those summary fields, never a command line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from spec.train_args import TrainArgs, parse_train_args, train_args_to_argv

LAUNCHER_MODULE = "workloads.train.launch"
TRAINER_MODULE = "workloads.train"
# The module each framework's ranks run, every one with workloads.train's CLI (spec.train_args).
TRAINER_MODULES = {"pytorch": TRAINER_MODULE, "tensorflow": "workloads.train.tf_keras",
                   "horovod": "workloads.train.hvd_torch", "paddle": "workloads.train.paddle_ps"}
NNODES = "--nnodes"
NPROC_PER_NODE = "--nproc_per_node"


@dataclass(frozen=True)
class Torchrun:
    """One torchrun agent's settings (torch.distributed.run's flags of the same names)."""
    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    max_restarts: int
    rdzv_backend: str
    rdzv_endpoint: str
    rdzv_id: str
    rdzv_conf: str
    local_addr: str | None = None  # the local run: this agent's address, loopback
    monitor_interval: float | None = None  # the local run: how often the agent polls its workers

    @property
    def nnodes(self) -> str:
        """``N`` for a fixed size, ``min:max`` for an elastic run."""
        return f"{self.min_nodes}:{self.max_nodes}" if self.min_nodes != self.max_nodes else str(self.max_nodes)


def torchrun_argv(t: Torchrun, *, program: Sequence[str] = ("torchrun",)) -> tuple[str, ...]:
    """``torchrun --nnodes=... --nproc_per_node=... ...``; ``program`` is how torchrun is started
    (``torchrun`` in the image, ``<python> -m torch.distributed.run`` locally)."""
    out = [*program, f"{NNODES}={t.nnodes}", f"{NPROC_PER_NODE}={t.nproc_per_node}",
           f"--max_restarts={t.max_restarts}", f"--rdzv_backend={t.rdzv_backend}",
           f"--rdzv_endpoint={t.rdzv_endpoint}", f"--rdzv_id={t.rdzv_id}", f"--rdzv_conf={t.rdzv_conf}"]
    if t.local_addr is not None:
        out.append(f"--local_addr={t.local_addr}")
    if t.monitor_interval is not None:
        out.append(f"--monitor_interval={t.monitor_interval}")
    return tuple(out)


def trainer_argv(args: TrainArgs, extra: Sequence[str] = (), *, module: str = TRAINER_MODULE) -> tuple[str, ...]:
    """``-m <module>`` and the trainer's arguments; ``extra`` (the experiment's own ``args``) last, so they win."""
    return ("-m", module, *train_args_to_argv(args), *extra)


def launcher_argv(*, python: str, results_dir: str, results_uri: str | None = None, experiment: str | None = None,
                  node_id: str | None = None, summary: str | None = None, grace: float | None = None) -> list[str]:
    """The results launcher's own part, up to (not including) ``--`` and the command it wraps."""
    out = [python, "-m", LAUNCHER_MODULE, "--results-dir", results_dir]
    for flag, value in (("--results-uri", results_uri), ("--experiment", experiment), ("--node-id", node_id),
                        ("--summary", summary), ("--grace", grace)):
        if value is not None:
            out += [flag, str(value)]
    return out


def launched_shape(command: Sequence[str]) -> dict[str, int | None]:
    """The most nodes and the processes per node of a command ``torchrun_argv`` built (None where
    it is not one, e.g. another framework's command)."""
    values: dict[str, str] = {}
    for arg in command:
        if arg.startswith("--") and "=" in arg:
            values.setdefault(*arg.split("=", 1))

    def number(flag: str) -> int | None:
        try:
            return int(values[flag].rsplit(":", 1)[-1])  # "1:2" (elastic) -> 2, the most it runs at
        except (KeyError, ValueError):
            return None
    return {"nodes": number(NNODES), "procs_per_node": number(NPROC_PER_NODE)}


def launched_train_args(command: Sequence[str]) -> TrainArgs | None:
    """The trainer's arguments inside a command ``trainer_argv`` built (after ``-m <a TRAINER_MODULES
    module>``, e.g. ``-m workloads.train``); None when there are none or they do not parse."""
    cmd = list(command)
    for i in range(len(cmd) - 1):
        if cmd[i] == "-m" and cmd[i + 1] in TRAINER_MODULES.values():
            try:
                return parse_train_args(cmd[i + 2:])
            except SystemExit:
                return None
    return None
