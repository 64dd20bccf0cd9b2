"""Paddle's entry in the local launch table: pservers and trainers on loopback, free ports.

The same processes as the cluster's two Jobs (``workloads.contracts.paddle_launch``): every one
runs ``python -m workloads.train.paddle_ps`` with the experiment's trainer arguments, its role
and endpoints in the env ``workloads.contracts.paddle_ps_env`` builds (both naming sets), here
on 127.0.0.1 with a free port each. Each is wrapped by the results launcher, as a cluster pod's
is; trainer 0 writes summary.json. The launcher runs on bench's python (it needs no Paddle),
the Paddle processes on the paddle venv's. The results layout is the cluster's: trainers in the experiment's folder,
pservers in its ``pserver/`` folder.
"""

from __future__ import annotations

import tempfile
from typing import Any, Callable

from bench.local_process import LocalProcess
from spec.launch_command import ENTRY_MODULES, launcher_argv, trainer_argv
from workloads.contracts import paddle_ps_env

LOOPBACK = "127.0.0.1"


def paddle_processes(exp: Any, *, python: str, launcher_python: str, free_port: Callable[[], int],
                     results_uri: str | None = None) -> list[LocalProcess]:
    """``exp.pservers`` pservers, then ``exp.max_nodes`` trainers (one process each)."""
    pservers = [f"{LOOPBACK}:{free_port()}" for _ in range(exp.pservers)]
    trainers = [f"{LOOPBACK}:{free_port()}" for _ in range(exp.max_nodes)]
    gloo = free_port()
    command = [python, *trainer_argv(exp.train, exp.extra_args, module=ENTRY_MODULES["paddle"])]
    out = []
    for role, endpoints in (("PSERVER", pservers), ("TRAINER", trainers)):
        # The cluster's layout (workloads.job_manifests): pservers under <results>/pserver/, each Job's
        # pod i logging to logs/node-<i>.log, index 0 of each writing its summary.json.
        sub = "/pserver" if role == "PSERVER" else ""
        for i in range(len(endpoints)):
            head = launcher_argv(python=launcher_python, results_dir=exp.results_dir + sub,
                                 results_uri=results_uri and results_uri + sub.lstrip("/") + ("/" if sub else ""),
                                 experiment=exp.name, node_id=f"node-{i}", summary="always" if i == 0 else "never",
                                 grace=15)
            env = paddle_ps_env(pservers=pservers, trainers=trainers, role=role, index=i,
                                task=exp.name, gloo_port=gloo)
            # Paddle's gloo set-up starts a multiprocessing Manager, whose AF_UNIX socket goes under
            # TMPDIR; the run's own _tmp folder can be deeper than sun_path's 108 bytes ("AF_UNIX path
            # too long"), so these processes keep bench's own temporary folder.
            env["TMPDIR"] = tempfile.gettempdir()
            out.append(LocalProcess(role=f"{role.lower()}-{i}", argv=tuple(head + ["--", *command]), env=env))
    return out
