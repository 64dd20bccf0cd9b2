"""How each framework's experiment starts on this machine (``bench run --local``): one entry per framework.

``LOCAL_LAUNCHES[framework]`` is a ``LocalLaunch``:

- ``processes(exp, ctx) -> list[LocalProcess]``: every process the experiment starts, in start
  order. Each ``LocalProcess`` has its ``argv`` (the results launcher wrapping the framework's
  command, built with ``wrapped``, so each node keeps its log and one writes summary.json, as in
  the cluster's pods), ``env`` (added on top of the run's environment: the framework's contract,
  e.g. ``TF_CONFIG``) and ``role`` (a word for the progress lines: node, worker, pserver, trainer).
- ``venv``: None to run the framework's processes with this Python, or the name ``<name>`` of
  ``requirements-<name>.txt``, whose venv ``.ci/setup-framework <name>`` builds
  (``bench.local.framework_venvs``); ``ctx.python`` is then that venv's python, and a missing venv
  stops ``bench run --local`` before anything starts, naming the command that builds it.
- ``procs_per_node``: a fixed count of processes per node (TensorFlow: one worker process per
  node), or None for the stack's ``local.procs_per_node``.
- ``rendezvous``: how its processes find each other when it is not the experiment's
  ``rdzv_backend`` (no etcd is started for it), for the plan's printed line.
- ``pservers``: whether the experiment's parameter servers run too (Paddle).

The entries: pytorch and tensorflow here; paddle's in ``bench.local.paddle``, horovod's in
``bench.local.horovod``. The pieces they are
built from (``LocalExperiment``, ``LocalContext``, ``LocalProcess``, ``LocalLaunch``, ``wrapped``,
``framework_command``) live in ``bench.local.process`` and are importable from here too.

``LocalContext`` carries what only the runner knows: the launcher's python (this one), the
framework's python, the torch rendezvous endpoint and id, and ``ports()``, a free loopback port per
call. The builders are pure given the context. A framework without an entry is skipped with a
one-line reason.
"""

from __future__ import annotations

import sys
from typing import Sequence

from bench.local.horovod import RENDEZVOUS as HOROVOD_RENDEZVOUS
from bench.local.horovod import horovod_processes
from bench.local.paddle import paddle_processes
from bench.local.process import (  # noqa: F401 - the interface
    LocalContext,
    LocalExperiment,
    LocalLaunch,
    LocalProcess,
    framework_command,
    wrapped,
)
from core.contract.launch_command import (
    Torchrun,
    launched_torchrun,
    launched_trainer,
    launcher_argv,
    torchrun_argv,
    trainer_argv,
)
from core.contract.names import ENV_CPU_DEVICES, ENV_FRAMEWORK, node_name
from workloads.launch.pytorch import rdzv_conf
from workloads.launch.tensorflow import tf_config


def local_agent(exp: LocalExperiment, *, endpoint: str, rdzv_id: str, last_call_timeout: int = 5,
                join_timeout: int = 300) -> Torchrun:
    """The cluster's torchrun agent settings, on loopback."""
    return Torchrun(min_nodes=exp.min_nodes, max_nodes=exp.max_nodes, nproc_per_node=exp.procs_per_node,
                    max_restarts=exp.max_restarts, rdzv_backend=exp.rdzv_backend, rdzv_endpoint=endpoint,
                    rdzv_id=rdzv_id, rdzv_conf=rdzv_conf(join_timeout=join_timeout, last_call_timeout=last_call_timeout),
                    local_addr="127.0.0.1", monitor_interval=0.5)


def torchrun_command(exp: LocalExperiment, *, python: str, endpoint: str, rdzv_id: str,
                     last_call_timeout: int = 5, join_timeout: int = 300) -> list[str]:
    """The cluster's torchrun and trainer command (core.contract.launch_command), on loopback."""
    agent = local_agent(exp, endpoint=endpoint, rdzv_id=rdzv_id, last_call_timeout=last_call_timeout,
                        join_timeout=join_timeout)
    return [*torchrun_argv(agent, program=(python, "-m", "torch.distributed.run")),
            *trainer_argv(exp.train, exp.extra_args)]


def node_command(exp: LocalExperiment, node: int, *, python: str, endpoint: str, rdzv_id: str,
                 results_uri: str | None = None) -> list[str]:
    """One local "node": the launcher wrapping one torchrun agent; node 0 writes the summary."""
    launched = launched_torchrun(local_agent(exp, endpoint=endpoint, rdzv_id=rdzv_id), exp.train, exp.extra_args)
    head = launcher_argv(python=python, results_dir=exp.results_dir, results_uri=results_uri, experiment=exp.name,
                         node_id=node_name(node), summary="always" if node == 0 else "never", grace=15,
                         launched=launched)
    return head + ["--", *torchrun_command(exp, python=python, endpoint=endpoint, rdzv_id=rdzv_id)]


def pytorch_processes(exp: LocalExperiment, ctx: LocalContext) -> list[LocalProcess]:
    """One launcher + torchrun agent per node (``local_plan.node_command``); node 0 writes the summary."""
    return [LocalProcess(tuple(node_command(exp, n, python=ctx.python, endpoint=ctx.endpoint, rdzv_id=ctx.rdzv_id)))
            for n in range(exp.max_nodes)]


def tensorflow_processes(exp: LocalExperiment, ctx: LocalContext) -> list[LocalProcess]:
    """One MultiWorkerMirroredStrategy worker per node, on loopback ports, each with the TF_CONFIG the
    cluster's pods get (``launch.tensorflow.tf_config``); worker 0 (TF's chief) writes the summary."""
    workers = [f"127.0.0.1:{ctx.ports()}" for _ in range(exp.max_nodes)]
    launched = launched_trainer(nodes=exp.max_nodes, procs_per_node=1, args=exp.train, extra=exp.extra_args)
    devices = {ENV_CPU_DEVICES: str(exp.devices_per_process)} if exp.devices_per_process > 1 else {}
    return [LocalProcess(wrapped(exp, ctx, node_id=node_name(i), summary=i == 0, command=framework_command(exp, ctx),
                                 launched=launched),
                         env={"TF_CONFIG": tf_config(workers, i), ENV_FRAMEWORK: "tensorflow", **devices},
                         role="worker")
            for i in range(exp.max_nodes)]


LOCAL_LAUNCHES: dict[str, LocalLaunch] = {
    "pytorch": LocalLaunch(pytorch_processes),
    "tensorflow": LocalLaunch(tensorflow_processes, venv="tensorflow", procs_per_node=1, rendezvous="TF_CONFIG"),
    "paddle": LocalLaunch(paddle_processes, venv="paddle", procs_per_node=1, pservers=True,
                          rendezvous="the Paddle env, gloo's HTTP store on pserver 0"),
    "horovod": LocalLaunch(horovod_processes, venv="horovod", rendezvous=HOROVOD_RENDEZVOUS),
}


def not_local(framework: str) -> str | None:
    """Why an experiment of ``framework`` cannot run locally, or None."""
    if framework in LOCAL_LAUNCHES:
        return None
    return f"framework {framework}: no local launch (bench/local/launch.py runs {', '.join(LOCAL_LAUNCHES)})"


def framework_python(framework: str, default: str) -> str | None:
    """The python that runs ``framework``'s processes: ``default`` (this one), its venv's, or None when
    its venv is not built (``bench.local.framework_venvs.missing_venv`` says how to build it)."""
    from bench.local.framework_venvs import venv_python

    launch = LOCAL_LAUNCHES[framework]
    if launch.venv is None:
        return default
    python = venv_python(launch.venv)
    return str(python) if python else None


def missing_venvs(plan: Sequence[LocalExperiment]) -> list[str]:
    """One line per framework of the runnable experiments whose venv is not built."""
    from bench.local.framework_venvs import missing_venv

    frameworks = dict.fromkeys(e.framework for e in plan if not e.skip)
    return [missing_venv(LOCAL_LAUNCHES[f].venv) for f in frameworks
            if LOCAL_LAUNCHES[f].venv and framework_python(f, sys.executable) is None]


def local_processes(exp: LocalExperiment, *, etcd: str | None, rdzv_id: str,
                    endpoint: str | None = None) -> list[LocalProcess]:
    """The experiment's processes with this machine's context: free ports, etcd's endpoint (or a
    c10d port), the framework's python (``missing_venvs`` was checked before)."""
    from bench.local.etcd import free_port

    if endpoint is None:
        endpoint = etcd if exp.rdzv_backend == "etcd-v2" and etcd else f"127.0.0.1:{free_port()}"
    python = framework_python(exp.framework, sys.executable)
    if python is None:
        raise RuntimeError(missing_venvs([exp])[0])
    ctx = LocalContext(launcher_python=sys.executable, python=python, endpoint=endpoint, rdzv_id=rdzv_id,
                       ports=free_port)
    return LOCAL_LAUNCHES[exp.framework].processes(exp, ctx)
