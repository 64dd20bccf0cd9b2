"""The pieces every framework's local launch entry is built from (``bench.local.launch`` holds the table).

``LocalExperiment`` is one experiment scaled down to this machine (``bench.local.plan``);
``LocalContext`` what only the runner knows (the pythons, the torch rendezvous, free ports);
``LocalProcess`` one process to start (argv, env on top of the run's, a role word for the
progress lines); ``LocalLaunch`` a framework's entry; ``wrapped`` puts the results launcher around
a framework's command, telling it the ``Launched`` it records; ``framework_command`` is the
framework's entry module with the trainer's arguments. A framework's entry module (e.g.
``bench.local.paddle``) imports these from here, so the table can import it back without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from core.contract.launch_command import (
    ENTRY_MODULES,
    Launched,
    launcher_argv,
    trainer_argv,
)
from core.contract.train_args import TrainArgs


@dataclass(frozen=True)
class LocalExperiment:
    name: str
    workload: str
    min_nodes: int
    max_nodes: int
    procs_per_node: int
    train: TrainArgs
    extra_args: tuple[str, ...]
    rdzv_backend: str
    max_restarts: int
    evaluate: bool
    results_dir: str
    notes: tuple[str, ...] = ()
    skip: str | None = None  # why it is not run locally
    repeat: int = 0  # 1..repeats for one repeat of an experiment with repeats: N (Experiment.runs)
    repeats: int = 1
    framework: str = "pytorch"  # its entry in bench.local.launch.LOCAL_LAUNCHES starts its processes
    pservers: int = 0  # parameter servers besides the max_nodes trainers (paddle)
    # devices one process drives: TensorFlow's one worker per node mirrors over this many logical CPU devices, as a
    # pod's worker drives every GPU of its node (EKSBENCH_CPU_DEVICES); 1 for the frameworks of one device a process
    devices_per_process: int = 1

    @property
    def label(self) -> str:
        """How the run's lines and rows name it: ``<name>`` or ``<name> repeat <k>/<N>``."""
        return f"{self.name} repeat {self.repeat}/{self.repeats}" if self.repeat else self.name

    @property
    def elastic(self) -> bool:
        return self.min_nodes != self.max_nodes

    @property
    def processes(self) -> int:
        return self.max_nodes * self.procs_per_node + self.pservers


@dataclass(frozen=True)
class LocalContext:
    launcher_python: str  # runs workloads.train.harness.launch (this Python: it has boto3 etc.)
    python: str  # runs the framework's own processes: this Python, or the framework's venv's
    endpoint: str  # pytorch: the rendezvous endpoint (etcd or c10d)
    rdzv_id: str
    ports: Callable[[], int]  # a free loopback port each call


@dataclass(frozen=True)
class LocalProcess:
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # on top of the run's environment
    role: str = "node"


@dataclass(frozen=True)
class LocalLaunch:
    processes: Callable[[LocalExperiment, LocalContext], list[LocalProcess]]
    venv: str | None = None
    procs_per_node: int | None = None
    rendezvous: str | None = None
    pservers: bool = False  # the experiment's pservers run too (``LocalExperiment.pservers``)


def wrapped(exp: LocalExperiment, ctx: LocalContext, *, node_id: str, summary: bool, command: Sequence[str],
            launched: Launched = Launched(), results_dir: str | None = None,
            stop_with: str | None = None) -> tuple[str, ...]:
    """The results launcher (``workloads.train.harness.launch``, run by this Python) around ``command``, writing to
    ``results_dir`` (the experiment's by default); ``launched`` tells it the shape and the trainer's
    arguments it records (it never reads them back from ``command``)."""
    head = launcher_argv(python=ctx.launcher_python, results_dir=results_dir or exp.results_dir, experiment=exp.name,
                         node_id=node_id, summary="always" if summary else "never", grace=15, launched=launched,
                         stop_with=stop_with)
    return (*head, "--", *command)


def framework_command(exp: LocalExperiment, ctx: LocalContext) -> tuple[str, ...]:
    """``<python> -m <the framework's entry module> <trainer arguments>`` (workloads.train's CLI)."""
    return (ctx.python, *trainer_argv(exp.train, exp.extra_args, module=ENTRY_MODULES[exp.framework]))
