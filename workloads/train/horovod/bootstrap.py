"""``python -m workloads.train.horovod.bootstrap CMD...``: start Horovod's Gloo workers on one pod.

What ``horovodrun --gloo`` does, without its SSH: pod 0 serves Horovod's Gloo rendezvous (the
HTTP key-value store horovodrun starts on its driver, ``horovod.runner.http.http_server``),
then every pod spawns ``CMD`` once per GPU with the per-process env of ``horovod_env``, as
horovodrun's Gloo launcher sets it (horovod/runner/gloo_run.py). Exits with the first non-zero
exit code of its processes (128 + N for a signal N); SIGTERM and SIGINT are passed on to them.

Reads ``EKSBENCH_HVD_HOSTS`` (comma-separated pod hosts, pod 0 first), ``EKSBENCH_HVD_SLOTS``
(GPUs per pod), ``EKSBENCH_HVD_PORT`` and the Indexed Job's ``JOB_COMPLETION_INDEX``.
Standard library only, apart from Horovod itself on pod 0; ``workloads.launch.horovod`` imports
``HOROVOD_PORT`` from here, so the cluster side and the pods share one definition.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import types

from core.contract.names import ENV_HVD_HOSTS, ENV_HVD_PORT, ENV_HVD_SLOTS

HOROVOD_PORT = 29500  # our fixed port for the Gloo rendezvous server on pod 0


def horovod_env(*, hosts: list[str], node: int, local_rank: int, gpus: int,
                port: int = HOROVOD_PORT) -> dict[str, str]:
    """The env of process ``local_rank`` on pod ``node``, with ``gpus`` processes on each of ``hosts``."""
    return {"HOROVOD_HOSTNAME": hosts[node], "HOROVOD_RANK": str(node * gpus + local_rank),
            "HOROVOD_SIZE": str(len(hosts) * gpus), "HOROVOD_LOCAL_RANK": str(local_rank),
            "HOROVOD_LOCAL_SIZE": str(gpus), "HOROVOD_CROSS_RANK": str(node), "HOROVOD_CROSS_SIZE": str(len(hosts)),
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": hosts[0], "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
            "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo"}


def serve_rendezvous(hosts: list[str], gpus: int, port: int) -> None:
    """Horovod's rendezvous server, in a daemon thread (pod 0 only; needs Horovod installed)."""
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    server = RendezvousHTTPServer(("0.0.0.0", port), RendezvousHandler, 0)
    server.init([types.SimpleNamespace(hostname=h, size=len(hosts) * gpus, local_size=gpus, local_rank=r,
                                       cross_size=len(hosts)) for h in hosts for r in range(gpus)])
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main(argv: list[str]) -> int:
    hosts = os.environ[ENV_HVD_HOSTS].split(",")
    gpus, node = int(os.environ[ENV_HVD_SLOTS]), int(os.environ["JOB_COMPLETION_INDEX"])
    port = int(os.environ[ENV_HVD_PORT])
    if node == 0:
        serve_rendezvous(hosts, gpus, port)
    procs: list[subprocess.Popen] = []
    stopped: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        """The launcher (or the kubelet) signals this process only: pass it on to every rank."""
        stopped.append(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for r in range(gpus):
        procs.append(subprocess.Popen(argv, env={**os.environ, **horovod_env(hosts=hosts, node=node, local_rank=r,
                                                                            gpus=gpus, port=port)}))
        if stopped:  # a signal came while starting: this rank missed it
            procs[-1].send_signal(stopped[0])
    codes = [p.wait() for p in procs]
    if stopped:
        return 128 + stopped[0]
    # A rank a signal ended has code -N: report it as a shell would, 128 + N.
    return next((c if c > 0 else 128 - c for c in codes if c), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
