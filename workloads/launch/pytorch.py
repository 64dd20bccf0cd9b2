"""PyTorch's launch: torchrun on every pod, with etcd-v2 (the default) or c10d rendezvous, elastic ``min:max``
nodes (the pods' side: ``workloads/train/pytorch/``)."""

from __future__ import annotations

from core.config.model import Experiment
from core.contract.launch_command import ENTRY_MODULES, Torchrun, launched_torchrun, torchrun_argv, trainer_argv
from core.contract.names import ENV_FRAMEWORK
from infra.environment import Environment
from workloads.launch.common import LAUNCHER_MODULES, Launch, image_pins, train_args_for, trainer_modules
from workloads.object_names import pod_fqdn

C10D_PORT = 29400  # torchrun's default c10d rendezvous port
# torchrun's rendezvous settings, the same on the cluster as in the local run (bench.local.plan.torchrun_command;
# both built by core.contract.launch_command): a new round closes 5 s after min nodes joined, an agent waits up to
# 300 s to join, and agents that miss 3 heartbeats 2 s apart are dropped.
RDZV_CONF = {"join_timeout": 300, "last_call_timeout": 5, "keep_alive_interval": 2, "keep_alive_max_attempt": 3}


def rdzv_conf(**overrides: int) -> str:
    """``--rdzv-conf``'s value: ``join_timeout=300,last_call_timeout=5,...``."""
    return ",".join(f"{k}={v}" for k, v in {**RDZV_CONF, **overrides}.items())


def pytorch_launch(e: Experiment, env: Environment, *, job: str, service: str, gpus: int,
                   instance_type: str | None = None) -> Launch:
    """torchrun on every pod; the rendezvous id is the Job name, stable for one experiment and run."""
    if e.rdzv_backend == "c10d":
        # The c10d store is hosted by the agent whose host matches the endpoint: pod index 0. torch
        # decides it by comparing the endpoint's host with its hostname, the canonical name
        # getaddrinfo gives for that hostname (from /etc/hosts), or a DNS answer
        # (torch/distributed/elastic/rendezvous/utils.py _matches_machine_hostname, used by
        # c10d_rendezvous_backend._create_tcp_store when is_host is not set). The short
        # "<job>-0.<svc>" matches only through DNS, which may not have the headless Service's
        # record yet; the full name matches pod 0's /etc/hosts line at once (pod_fqdn).
        endpoint, port = f"{pod_fqdn(job, 0, service, env.namespace)}:{C10D_PORT}", C10D_PORT
    else:
        endpoint, port = env.etcd_endpoint, None
    agent = Torchrun(min_nodes=e.min_nodes, max_nodes=e.max_nodes, nproc_per_node=gpus, max_restarts=e.max_restarts,
                     rdzv_backend=e.rdzv_backend, rdzv_endpoint=endpoint, rdzv_id=job, rdzv_conf=rdzv_conf())
    train = train_args_for(e, env, instance_type=instance_type)
    modules = trainer_modules(e, ("etcd", *LAUNCHER_MODULES) if e.rdzv_backend == "etcd-v2" else LAUNCHER_MODULES)
    return Launch(argv=torchrun_argv(agent) + trainer_argv(train, e.args, module=ENTRY_MODULES[e.framework]),
                  port=port, modules=modules, pins=image_pins(e), env={ENV_FRAMEWORK: "pytorch"},
                  launched=launched_torchrun(agent, train, e.args))
