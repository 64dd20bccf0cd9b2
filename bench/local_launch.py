"""How each framework's experiment starts on this machine (``bench run --local``): one entry per framework.

``LOCAL_LAUNCHES[framework]`` is a ``LocalLaunch``:

- ``processes(exp, ctx) -> list[LocalProcess]``: every process the experiment starts, in start
  order. Each ``LocalProcess`` has its ``argv`` (the results launcher wrapping the framework's
  command, built with ``wrapped``, so each node keeps its log and one writes summary.json, as in
  the cluster's pods), ``env`` (added on top of the run's environment: the framework's contract,
  e.g. ``TF_CONFIG``) and ``role`` (a word for the progress lines: node, worker, pserver, trainer).
- ``venv``: None to run the framework's processes with this Python, or the name ``<name>`` of
  ``requirements-<name>.txt``, whose venv ``.ci/setup-framework <name>`` builds
  (``bench.framework_venvs``); ``ctx.python`` is then that venv's python, and a missing venv
  stops ``bench run --local`` before anything starts, naming the command that builds it.
- ``procs_per_node``: a fixed count of processes per node (TensorFlow: one worker process per
  node), or None for the stack's ``local.procs_per_node``.
- ``rendezvous``: how its processes find each other when it is not the experiment's
  ``rdzv_backend`` (no etcd is started for it), for the plan's printed line.

``LocalContext`` carries what only the runner knows: the launcher's python (this one), the
framework's python, the torch rendezvous endpoint and id, and ``ports()``, a free loopback port per
call. The builders are pure given the context. A framework without an entry is skipped with a
one-line reason.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from spec.launch_command import (ENTRY_MODULES, Launched, Torchrun, launched_torchrun, launched_trainer, launcher_argv,
                                 torchrun_argv, trainer_argv)
from spec.train_args import TrainArgs
from workloads.contracts import rdzv_conf, tf_config


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
    framework: str = "pytorch"  # its entry in bench.local_launch.LOCAL_LAUNCHES starts its processes

    @property
    def label(self) -> str:
        """How the run's lines and rows name it: ``<name>`` or ``<name> repeat <k>/<N>``."""
        return f"{self.name} repeat {self.repeat}/{self.repeats}" if self.repeat else self.name

    @property
    def elastic(self) -> bool:
        return self.min_nodes != self.max_nodes

    @property
    def processes(self) -> int:
        return self.max_nodes * self.procs_per_node


def local_agent(exp: LocalExperiment, *, endpoint: str, rdzv_id: str, last_call_timeout: int = 5,
                join_timeout: int = 300) -> Torchrun:
    """The cluster's torchrun agent settings, on loopback."""
    return Torchrun(min_nodes=exp.min_nodes, max_nodes=exp.max_nodes, nproc_per_node=exp.procs_per_node,
                    max_restarts=exp.max_restarts, rdzv_backend=exp.rdzv_backend, rdzv_endpoint=endpoint,
                    rdzv_id=rdzv_id, rdzv_conf=rdzv_conf(join_timeout=join_timeout, last_call_timeout=last_call_timeout),
                    local_addr="127.0.0.1", monitor_interval=0.5)


def torchrun_command(exp: LocalExperiment, *, python: str, endpoint: str, rdzv_id: str,
                     last_call_timeout: int = 5, join_timeout: int = 300) -> list[str]:
    """The cluster's torchrun and trainer command (spec.launch_command), on loopback."""
    agent = local_agent(exp, endpoint=endpoint, rdzv_id=rdzv_id, last_call_timeout=last_call_timeout,
                        join_timeout=join_timeout)
    return [*torchrun_argv(agent, program=(python, "-m", "torch.distributed.run")),
            *trainer_argv(exp.train, exp.extra_args)]


def node_command(exp: LocalExperiment, node: int, *, python: str, endpoint: str, rdzv_id: str,
                 results_uri: str | None = None) -> list[str]:
    """One local "node": the launcher wrapping one torchrun agent; node 0 writes the summary."""
    launched = launched_torchrun(local_agent(exp, endpoint=endpoint, rdzv_id=rdzv_id), exp.train, exp.extra_args)
    head = launcher_argv(python=python, results_dir=exp.results_dir, results_uri=results_uri, experiment=exp.name,
                         node_id=f"node-{node}", summary="always" if node == 0 else "never", grace=15,
                         launched=launched)
    return head + ["--", *torchrun_command(exp, python=python, endpoint=endpoint, rdzv_id=rdzv_id)]


@dataclass(frozen=True)
class LocalContext:
    launcher_python: str  # runs workloads.train.launch (this Python: it has boto3 etc.)
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


def wrapped(exp: LocalExperiment, ctx: LocalContext, *, node_id: str, summary: bool, command: Sequence[str],
            launched: Launched = Launched()) -> tuple[str, ...]:
    """The results launcher (``workloads.train.launch``, run by this Python) around ``command``; ``launched``
    tells it the shape and the trainer's arguments it records (it never reads them back from ``command``)."""
    head = launcher_argv(python=ctx.launcher_python, results_dir=exp.results_dir, experiment=exp.name,
                         node_id=node_id, summary="always" if summary else "never", grace=15, launched=launched)
    return (*head, "--", *command)


def framework_command(exp: LocalExperiment, ctx: LocalContext) -> tuple[str, ...]:
    """``<python> -m <the framework's entry module> <trainer arguments>`` (workloads.train's CLI)."""
    return (ctx.python, *trainer_argv(exp.train, exp.extra_args, module=ENTRY_MODULES[exp.framework]))


def pytorch_processes(exp: LocalExperiment, ctx: LocalContext) -> list[LocalProcess]:
    """One launcher + torchrun agent per node (``local_plan.node_command``); node 0 writes the summary."""
    return [LocalProcess(tuple(node_command(exp, n, python=ctx.python, endpoint=ctx.endpoint, rdzv_id=ctx.rdzv_id)))
            for n in range(exp.max_nodes)]


def tensorflow_processes(exp: LocalExperiment, ctx: LocalContext) -> list[LocalProcess]:
    """One MultiWorkerMirroredStrategy worker per node, on loopback ports, each with the TF_CONFIG the
    cluster's pods get (``contracts.tf_config``); worker 0 (TF's chief) writes the summary."""
    workers = [f"127.0.0.1:{ctx.ports()}" for _ in range(exp.max_nodes)]
    launched = launched_trainer(nodes=exp.max_nodes, procs_per_node=1, args=exp.train, extra=exp.extra_args)
    return [LocalProcess(wrapped(exp, ctx, node_id=f"node-{i}", summary=i == 0, command=framework_command(exp, ctx),
                                 launched=launched),
                         env={"TF_CONFIG": tf_config(workers, i), "EKSBENCH_FRAMEWORK": "tensorflow"}, role="worker")
            for i in range(exp.max_nodes)]


LOCAL_LAUNCHES: dict[str, LocalLaunch] = {
    "pytorch": LocalLaunch(pytorch_processes),
    "tensorflow": LocalLaunch(tensorflow_processes, venv="tensorflow", procs_per_node=1, rendezvous="TF_CONFIG"),
}


def not_local(framework: str) -> str | None:
    """Why an experiment of ``framework`` cannot run locally, or None."""
    if framework in LOCAL_LAUNCHES:
        return None
    return f"framework {framework}: no local launch (bench/local_launch.py runs {', '.join(LOCAL_LAUNCHES)})"


def framework_python(framework: str, default: str) -> str | None:
    """The python that runs ``framework``'s processes: ``default`` (this one), its venv's, or None when
    its venv is not built (``bench.framework_venvs.missing_venv`` says how to build it)."""
    from bench.framework_venvs import venv_python

    launch = LOCAL_LAUNCHES[framework]
    if launch.venv is None:
        return default
    python = venv_python(launch.venv)
    return str(python) if python else None


def missing_venvs(plan: Sequence[LocalExperiment]) -> list[str]:
    """One line per framework of the runnable experiments whose venv is not built."""
    from bench.framework_venvs import missing_venv

    frameworks = dict.fromkeys(e.framework for e in plan if not e.skip)
    return [missing_venv(LOCAL_LAUNCHES[f].venv) for f in frameworks
            if LOCAL_LAUNCHES[f].venv and framework_python(f, sys.executable) is None]


def local_processes(exp: LocalExperiment, *, etcd: str | None, rdzv_id: str,
                    endpoint: str | None = None) -> list[LocalProcess]:
    """The experiment's processes with this machine's context: free ports, etcd's endpoint (or a
    c10d port), the framework's python (``missing_venvs`` was checked before)."""
    from bench.local_etcd import free_port

    if endpoint is None:
        endpoint = etcd if exp.rdzv_backend == "etcd-v2" and etcd else f"127.0.0.1:{free_port()}"
    python = framework_python(exp.framework, sys.executable)
    if python is None:
        raise RuntimeError(missing_venvs([exp])[0])
    ctx = LocalContext(launcher_python=sys.executable, python=python, endpoint=endpoint, rdzv_id=rdzv_id,
                       ports=free_port)
    return LOCAL_LAUNCHES[exp.framework].processes(exp, ctx)
