"""How ``bench run --local`` starts each framework's processes: one entry per framework.

An entry (``bench.local_process.FrameworkLocal``) turns a ``bench.local_plan.LocalExperiment``
into the local processes that stand in for its cluster pods (argv, the env added to the run's,
the python it starts from, and its role), each wrapped by the results launcher
(``workloads.train.launch``) as the pods' commands are, so every framework's summary.json is
written the same way; and it names how its processes meet when that is not the experiment's
torchrun backend (the plan prints it, and no etcd is started for it). ``with_launcher`` marks a
framework with no entry as skipped, with the reason. Pure: no processes are started here.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from bench.local_horovod import RENDEZVOUS as HOROVOD_RENDEZVOUS
from bench.local_horovod import horovod_processes
from bench.local_plan import LocalExperiment, node_command
from bench.local_process import FrameworkLocal, LocalProcess


def pytorch_processes(exp: LocalExperiment, *, endpoint: str, rdzv_id: str) -> list[LocalProcess]:
    """One launcher + torchrun agent per node (bench.local_plan.node_command), from this python."""
    return [LocalProcess(argv=tuple(node_command(exp, n, python=sys.executable, endpoint=endpoint, rdzv_id=rdzv_id)),
                         python=sys.executable, role=f"node-{n}") for n in range(exp.max_nodes)]


LOCAL_LAUNCH: dict[str, FrameworkLocal] = {
    "pytorch": FrameworkLocal(pytorch_processes),
    "horovod": FrameworkLocal(horovod_processes, rendezvous=HOROVOD_RENDEZVOUS),
}


def with_launcher(exp: LocalExperiment) -> LocalExperiment:
    """``exp`` skipped when its framework has no entry, else with its entry's rendezvous."""
    entry = LOCAL_LAUNCH.get(exp.framework)
    if entry is None:
        return replace(exp, skip=f"framework {exp.framework}: no local launcher for it (bench.local_launch)")
    return replace(exp, rdzv_backend=entry.rendezvous) if entry.rendezvous else exp


def local_processes(exp: Any, *, endpoint: str, rdzv_id: str) -> list[LocalProcess]:
    """The processes of ``exp`` (a runnable LocalExperiment); a framework venv's absence raises
    ``bench.framework_venvs.VenvMissing`` with the command that builds it."""
    return LOCAL_LAUNCH[exp.framework].processes(exp, endpoint=endpoint, rdzv_id=rdzv_id)
