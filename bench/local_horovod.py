"""Horovod's entry in the local launch table (``bench.local_launch``): two "nodes" on loopback.

Each node is what a Horovod pod runs (``workloads.contracts.horovod_launch``): the results
launcher wrapping ``workloads.train.horovod_bootstrap``, which on node 0 serves Horovod's HTTP
Gloo rendezvous and on every node starts ``workloads.train.hvd_torch`` once per slot with
``horovod_env``. Locally the pods' DNS names become loopback addresses (node 0 is 127.0.0.1,
where the rendezvous is served; node n is 127.0.0.(n+1), a distinct HOROVOD_HOSTNAME so each node
is its own Gloo "host"), the rendezvous port is a free one, and Gloo is told to use the loopback
interface (``HOROVOD_GLOO_IFACE``, as horovodrun sets it: horovod/runner/gloo_run.py). Every
process runs from Horovod's own venv (``.ci/setup-framework horovod``).
"""

from __future__ import annotations

from typing import Any

from bench.framework_venvs import venv_python
from bench.local_process import LocalProcess
from spec.launch_command import TRAINER_MODULES, launcher_argv, trainer_argv
from workloads.contracts import HOROVOD_BOOTSTRAP_MODULE

RENDEZVOUS = "horovod-gloo-http"  # Horovod's HTTP key-value rendezvous, served by node 0's bootstrap


def loopback_hosts(nodes: int) -> list[str]:
    return [f"127.0.0.{n + 1}" for n in range(nodes)]


def horovod_processes(exp: Any, *, endpoint: str, rdzv_id: str, python: str | None = None) -> list[LocalProcess]:
    """One launcher + bootstrap per node; ``endpoint``'s port serves the rendezvous. ``python``:
    default Horovod's venv (VenvMissing, naming the command that builds it, when absent)."""
    python = python or venv_python("horovod")
    port = endpoint.rsplit(":", 1)[1]
    hosts = ",".join(loopback_hosts(exp.max_nodes))
    train = trainer_argv(exp.train, exp.extra_args, module=TRAINER_MODULES["horovod"])
    out = []
    for n in range(exp.max_nodes):
        head = launcher_argv(python=python, results_dir=exp.results_dir, experiment=exp.name, node_id=f"node-{n}",
                             summary="always" if n == 0 else "never", grace=15)
        env = {"EKSBENCH_FRAMEWORK": "horovod", "EKSBENCH_HVD_HOSTS": hosts,
               "EKSBENCH_HVD_SLOTS": str(exp.procs_per_node), "EKSBENCH_HVD_PORT": port,
               "JOB_COMPLETION_INDEX": str(n), "HOROVOD_GLOO_IFACE": "lo"}
        out.append(LocalProcess(argv=(*head, "--", python, "-m", HOROVOD_BOOTSTRAP_MODULE, python, *train),
                                python=python, role=f"node-{n}", env=env))
    return out
