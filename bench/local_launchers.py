"""The local runner's per-framework launch table: framework -> the processes one experiment runs.

``bench run --local`` starts PyTorch experiments as launcher + torchrun "nodes"
(``bench.local_plan.node_command``); every other framework that runs locally has one entry here,
a function giving its processes (argv, env, role), each wrapped by the results launcher
(``workloads.train.launch``) as on the cluster, so summary.json is written the same way. A
framework whose packages live in a venv of its own (``bench.framework_venvs``) names it, and
its processes run that venv's python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from bench.local_process import LocalProcess


# (experiment, *, python (the framework's), launcher_python, free_port) -> processes
Launcher = Callable[..., list[LocalProcess]]


@dataclass(frozen=True)
class LocalLaunch:
    processes: Launcher
    venv: str | None = None  # the framework venv its processes run in (bench.framework_venvs)


def _table() -> dict[str, LocalLaunch]:
    from bench.paddle_local import paddle_processes

    return {"paddle": LocalLaunch(processes=paddle_processes, venv="paddle")}


def local_launch(framework: str) -> LocalLaunch | None:
    """The framework's entry, or None (pytorch runs through torchrun nodes; others do not run locally)."""
    return _table().get(framework)


def runs_locally(framework: str) -> bool:
    return framework == "pytorch" or local_launch(framework) is not None


def local_frameworks() -> tuple[str, ...]:
    return ("pytorch", *_table())


def local_processes(exp: Any, *, python: str, launcher_python: str, free_port: Callable[[], int]) -> list[LocalProcess]:
    return _table()[exp.framework].processes(exp, python=python, launcher_python=launcher_python,
                                             free_port=free_port)
