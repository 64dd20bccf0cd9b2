"""Paddle's entry in the local launch table (``bench.local.launch.LOCAL_LAUNCHES["paddle"]``): pservers
and trainers on loopback, free ports.

The same processes as the cluster's two Jobs (``workloads.launch.paddle.paddle_launch``): every one
runs ``python -m workloads.train.paddle.ps`` with the experiment's trainer arguments, its role
and endpoints in the env ``workloads.launch.paddle.paddle_ps_env`` builds (both naming sets), here
on 127.0.0.1 with a free port each. Each is wrapped by the results launcher, as a cluster pod's
is, and told its Job's shape (one process per pod); trainer 0 writes summary.json. The launcher
runs on bench's python (it needs no Paddle), the Paddle processes on the paddle venv's. The
results layout is the cluster's: trainers in the experiment's folder, pservers in its ``pserver/``
folder.
"""

from __future__ import annotations

import tempfile

from bench.local.process import (
    LocalContext,
    LocalExperiment,
    LocalProcess,
    framework_command,
    wrapped,
)
from core.contract.launch_command import launched_trainer
from core.contract.names import SUMMARY_FILE, node_name
from workloads.launch.paddle import paddle_ps_env

LOOPBACK = "127.0.0.1"


def paddle_processes(exp: LocalExperiment, ctx: LocalContext) -> list[LocalProcess]:
    """``exp.pservers`` pservers, then ``exp.max_nodes`` trainers (one process each)."""
    pservers = [f"{LOOPBACK}:{ctx.ports()}" for _ in range(exp.pservers)]
    trainers = [f"{LOOPBACK}:{ctx.ports()}" for _ in range(exp.max_nodes)]
    gloo = ctx.ports()
    command = framework_command(exp, ctx)
    out = []
    for role, endpoints in (("PSERVER", pservers), ("TRAINER", trainers)):
        # The cluster's layout (workloads.job_manifests): pservers under <results>/pserver/, each Job's
        # pod i logging to logs/node-<i>.log, index 0 of each writing its summary.json.
        results_dir = exp.results_dir + ("/pserver" if role == "PSERVER" else "")
        launched = launched_trainer(nodes=len(endpoints), procs_per_node=1, args=exp.train, extra=exp.extra_args)
        for i in range(len(endpoints)):
            env = paddle_ps_env(pservers=pservers, trainers=trainers, role=role, index=i, task=exp.name,
                                gloo_port=gloo)
            # Paddle's gloo set-up starts a multiprocessing Manager, whose AF_UNIX socket goes under
            # TMPDIR; the run's own _tmp folder can be deeper than sun_path's 108 bytes ("AF_UNIX path
            # too long"), so these processes keep bench's own temporary folder.
            env["TMPDIR"] = tempfile.gettempdir()
            # pservers end with their trainers: trainer 0's summary.json, whatever it says, stops them
            stop_with = f"{exp.results_dir}/{SUMMARY_FILE}" if role == "PSERVER" else None
            out.append(LocalProcess(wrapped(exp, ctx, node_id=node_name(i), summary=i == 0, command=command,
                                            launched=launched, results_dir=results_dir, stop_with=stop_with),
                                    env=env, role=role.lower()))
    return out
