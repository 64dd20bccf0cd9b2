"""The one builder of the commands that start training: the results launcher, torchrun, the trainer.

The cluster's Jobs (``workloads.launch``) and the local run
(``bench.local.plan``) both build their command lines here, so a flag is spelled once. torchrun's
flags are spelled with underscores, which every torch the images carry accepts (the dashed
aliases are newer; torch/distributed/run.py ``get_args_parser`` lists both for each flag).

The launcher (``workloads.train.harness.launch``) is told what it records beside the command it wraps (the
most nodes, the processes per node, the trainer's arguments: ``Launched``) through its own arguments,
built here from the same values as the command; it never reads the command back (``bench.results.frames``
reads those summary fields, never a command line).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Sequence

from core.contract.train_args import TrainArgs, apply_train_args, train_args_to_argv

LAUNCHER_MODULE = "workloads.train.harness.launch"
TRAINER_MODULE = "workloads.train.pytorch"
# The package each framework runs (its __main__.py), all with the same CLI (core.contract.train_args): one
# room of workloads/train per framework. The launcher finds the trainer's arguments after any of them.
ENTRY_MODULES = {"pytorch": TRAINER_MODULE, "tensorflow": "workloads.train.tensorflow",
                 "horovod": "workloads.train.horovod", "paddle": "workloads.train.paddle"}
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


@dataclass(frozen=True)
class Launched:
    """What the launcher records in the summary about the command it wraps; None where the command is no
    torchrun (the shape) or no trainer (the trainer's arguments)."""
    nodes: int | None = None  # the most nodes it runs at ("1:2", elastic, runs at 2)
    procs_per_node: int | None = None
    train: TrainArgs | None = None  # with the experiment's own arguments applied, as the trainer sees them


def launched_trainer(*, nodes: int, procs_per_node: int, args: TrainArgs, extra: Sequence[str] = ()) -> Launched:
    """What the launcher records for ``nodes`` nodes of ``procs_per_node`` processes each running
    ``trainer_argv(args, extra)`` (any framework's entry module)."""
    return Launched(nodes=nodes, procs_per_node=procs_per_node, train=apply_train_args(args, extra))


def launched_torchrun(t: Torchrun, args: TrainArgs, extra: Sequence[str] = ()) -> Launched:
    """What the launcher records for ``torchrun_argv(t)`` running ``trainer_argv(args, extra)``."""
    return launched_trainer(nodes=t.max_nodes, procs_per_node=t.nproc_per_node, args=args, extra=extra)


def launcher_argv(*, python: str, results_dir: str, results_uri: str | None = None, experiment: str | None = None,
                  node_id: str | None = None, summary: str | None = None, grace: float | None = None,
                  stop_with: str | None = None, launched: Launched = Launched()) -> list[str]:
    """The results launcher's own part, up to (not including) ``--`` and the command it wraps. ``stop_with``:
    a summary.json whose appearance ends the command (paddle's pservers end with their trainers)."""
    out = [python, "-m", LAUNCHER_MODULE, "--results-dir", results_dir]
    for flag, value in (("--results-uri", results_uri), ("--experiment", experiment), ("--node-id", node_id),
                        ("--summary", summary), ("--grace", grace), ("--stop-with", stop_with)):
        if value is not None:
            out += [flag, str(value)]
    return out + launched_argv(launched)


def launched_argv(launched: Launched) -> list[str]:
    """The launcher's arguments that tell it what it records (``--nodes``, ``--procs-per-node``,
    ``--train-config``: the trainer's arguments as a JSON object); none for what is None."""
    train = json.dumps(asdict(launched.train), separators=(",", ":")) if launched.train is not None else None
    out = []
    for flag, value in (("--nodes", launched.nodes), ("--procs-per-node", launched.procs_per_node),
                        ("--train-config", train)):
        if value is not None:
            out += [flag, str(value)]
    return out
