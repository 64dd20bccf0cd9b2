"""Horovod's entry in the local launch table (``bench.local.launch.LOCAL_LAUNCHES["horovod"]``): two
"nodes" on loopback.

Each node is what a Horovod pod runs (``workloads.launch.horovod.horovod_launch``): the results
launcher wrapping ``workloads.train.horovod.bootstrap``, which on node 0 serves Horovod's HTTP
Gloo rendezvous and on every node starts ``workloads.train.horovod.trainer`` once per slot with
``horovod_env``. Locally the pods' DNS names become loopback addresses (node 0 is 127.0.0.1,
where the rendezvous is served; node n is 127.0.0.(n+1), a distinct HOROVOD_HOSTNAME so each node
is its own Gloo "host"), the rendezvous port is a free one, and Gloo is told to use the loopback
interface (``HOROVOD_GLOO_IFACE``, as horovodrun sets it: horovod/runner/gloo_run.py). The
bootstrap and its ranks run from Horovod's own venv (``.ci/setup-framework horovod``); the
launcher, as for every framework, from bench's python.
"""

from __future__ import annotations

from bench.local.process import (
    LocalContext,
    LocalExperiment,
    LocalProcess,
    framework_command,
    wrapped,
)
from core.contract.launch_command import launched_trainer
from core.contract.names import (
    ENV_FRAMEWORK,
    ENV_HVD_HOSTS,
    ENV_HVD_PORT,
    ENV_HVD_SLOTS,
    node_name,
)
from workloads.launch.horovod import HOROVOD_BOOTSTRAP_MODULE

RENDEZVOUS = "horovod-gloo-http"  # Horovod's HTTP key-value rendezvous, served by node 0's bootstrap


def loopback_hosts(nodes: int) -> list[str]:
    return [f"127.0.0.{n + 1}" for n in range(nodes)]


def horovod_processes(exp: LocalExperiment, ctx: LocalContext) -> list[LocalProcess]:
    """One launcher + bootstrap per node, ``exp.procs_per_node`` ranks each; a free port serves the rendezvous."""
    port = ctx.ports()
    hosts = ",".join(loopback_hosts(exp.max_nodes))
    command = (ctx.python, "-m", HOROVOD_BOOTSTRAP_MODULE, *framework_command(exp, ctx))
    launched = launched_trainer(nodes=exp.max_nodes, procs_per_node=exp.procs_per_node, args=exp.train,
                                extra=exp.extra_args)
    return [LocalProcess(wrapped(exp, ctx, node_id=node_name(n), summary=n == 0, command=command, launched=launched),
                         env={ENV_FRAMEWORK: "horovod", ENV_HVD_HOSTS: hosts,
                              ENV_HVD_SLOTS: str(exp.procs_per_node), ENV_HVD_PORT: str(port),
                              "JOB_COMPLETION_INDEX": str(n), "HOROVOD_GLOO_IFACE": "lo"})
            for n in range(exp.max_nodes)]
