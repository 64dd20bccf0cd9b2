"""Horovod's launch: every pod runs the bootstrap (``workloads.train.horovod.bootstrap``), which starts one
process per GPU with Horovod's Gloo env: no SSH, no MPI operator (the pods' side: ``workloads/train/horovod/``)."""

from __future__ import annotations

from core.config.model import Experiment
from core.contract.names import ENV_FRAMEWORK, ENV_HVD_HOSTS, ENV_HVD_PORT, ENV_HVD_SLOTS
from infra.environment import Environment
from workloads.launch.common import LAUNCHER_MODULES, Launch, entry_command, image_pins, trainer_modules
from workloads.object_names import pod_host
from workloads.train.horovod.bootstrap import HOROVOD_PORT  # one definition, shipped

HOROVOD_BOOTSTRAP_MODULE = "workloads.train.horovod.bootstrap"


def horovod_launch(e: Experiment, env: Environment, *, job: str, service: str, gpus: int) -> Launch:
    """Every pod runs workloads.train.horovod.bootstrap, which starts one process per GPU with horovod_env()."""
    hosts = ",".join(pod_host(job, i, service) for i in range(e.max_nodes))
    # gpus ranks per pod, each "python3 -m workloads.train.horovod <args>"
    argv, launched = entry_command(e, env, nodes=e.max_nodes, procs_per_node=gpus,
                                   prefix=("python3", "-m", HOROVOD_BOOTSTRAP_MODULE, "python3"))
    return Launch(argv=argv, port=HOROVOD_PORT, launched=launched, modules=trainer_modules(e, LAUNCHER_MODULES),
                  pins=image_pins(e), env={ENV_FRAMEWORK: "horovod", ENV_HVD_HOSTS: hosts, ENV_HVD_SLOTS: str(gpus),
                       ENV_HVD_PORT: str(HOROVOD_PORT)})
