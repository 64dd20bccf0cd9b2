"""Paddle's launch: the parameter-server env contract (TRAINING_ROLE, PSERVER_HOSTS, ...; both naming sets, see
``paddle_ps_env``) for a trainer Indexed Job and a pserver Indexed Job, and Paddle's gloo HTTP store on pserver 0
(the pods' side: ``workloads/train/paddle/``)."""

from __future__ import annotations

from core.config.model import Experiment
from core.contract.names import ENV_FRAMEWORK
from infra.environment import Environment
from workloads.launch.common import Launch, entry_command
from workloads.object_names import paddle_job_names, pod_host

PADDLE_PORT = 6170  # pserver listen port
PADDLE_GLOO_PORT = 6171  # pserver 0: Paddle's HTTP store for the trainers' gloo barriers

# Per-pod paddle variables, set by the prelude from JOB_COMPLETION_INDEX (the rest is the same in every pod).
PADDLE_PER_POD = ("SERVER_ENDPOINT", "TRAINER_INDEX", "PADDLE_TRAINER_ID", "POD_IP")


def paddle_env(e: Experiment, *, job: str, service: str, role: str, index: int) -> dict[str, str]:
    """The env one paddle pod gets: role PSERVER or TRAINER, with its index (``paddle_ps_env`` on
    the pods' DNS names). Since the pserver list holds the pods' DNS names (fixed before any pod
    has an IP), a pserver's POD_IP is its own DNS name, so Paddle's lookup of ``POD_IP:PADDLE_PORT``
    in the list finds it. Trainers get POD_IP from the downward API (status.podIP, job_manifests);
    every paddle pod also has that IP as EKSBENCH_POD_IP.
    """
    _, ps_job = paddle_job_names(job)
    pservers = [f"{pod_host(ps_job, i, service)}:{PADDLE_PORT}" for i in range(e.pservers)]
    trainers = [f"{pod_host(job, i, service)}:{PADDLE_PORT}" for i in range(e.max_nodes)]
    env = paddle_ps_env(pservers=pservers, trainers=trainers, role=role, index=index, task=job)
    if role != "PSERVER":
        del env["POD_IP"]  # the downward API's (job_manifests)
    return env


def paddle_ps_env(*, pservers: list[str], trainers: list[str], role: str, index: int, task: str,
                  gloo_port: int = PADDLE_GLOO_PORT) -> dict[str, str]:
    """One paddle process's env from the endpoint lists (``host:port``); the cluster's pods and the
    local run (bench.local.paddle) both build it here. Both naming sets:

    - Fluid-era names, from PaddlePaddle's AWS benchmarking tool (PaddlePaddle/Paddle,
      tools/aws_benchmarking/README.md, the Fluid 0.x/1.x days): TASK_NAME, TRAINING_ROLE,
      PSERVER_HOSTS = PSERVERS (comma-separated pserver endpoints), TRAINERS (count),
      SERVER_ENDPOINT (a pserver's own endpoint) and TRAINER_INDEX (a trainer's index).
    - What Paddle 2.x/3.x fleet reads: ``PaddleCloudRoleMaker._ps_env`` in
      python/paddle/distributed/fleet/base/role_maker.py (checked at PaddlePaddle/Paddle
      d4038ff and in the 3.0.0 wheel): PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ENDPOINTS,
      PADDLE_TRAINERS_NUM, TRAINING_ROLE, PADDLE_TRAINER_ID (trainers), and PADDLE_PORT and
      POD_IP for every role (3.0.0 requires both of a trainer too), joined as ``POD_IP:PADDLE_PORT``.
    - The trainers' barrier store, as Paddle's own PS launcher sets it
      (python/paddle/distributed/fleet/launch_utils.py ``ParameterServerLauncher``):
      PADDLE_WITH_GLOO=1 (gloo among the trainers; set in every pod, since pserver 0 serves the store),
      PADDLE_GLOO_RENDEZVOUS=3 (HTTP) and
      PADDLE_GLOO_HTTP_ENDPOINT, served by pserver 0 (``_gloo_init``: "self._is_server() and
      self._server_index() == 0" starts the HTTP store) on ``gloo_port``.
    """
    ps, own = ",".join(pservers), (pservers if role == "PSERVER" else trainers)[index]
    host, port = own.rsplit(":", 1)
    env = {"TASK_NAME": task, "TRAINING_ROLE": role, "PSERVER_HOSTS": ps, "PSERVERS": ps,
           "TRAINERS": str(len(trainers)), ENV_FRAMEWORK: "paddle",
           "PADDLE_PSERVERS_IP_PORT_LIST": ps, "PADDLE_TRAINER_ENDPOINTS": ",".join(trainers),
           "PADDLE_TRAINERS_NUM": str(len(trainers)), "PADDLE_PORT": port, "POD_IP": host,
           "PADDLE_WITH_GLOO": "1", "PADDLE_GLOO_RENDEZVOUS": "3",
           "PADDLE_GLOO_HTTP_ENDPOINT": f"{pservers[0].rsplit(':', 1)[0]}:{gloo_port}"}
    if role == "PSERVER":
        env["SERVER_ENDPOINT"] = own
    else:
        env["TRAINER_INDEX"] = env["PADDLE_TRAINER_ID"] = str(index)
    return env


def paddle_launch(e: Experiment, env: Environment, *, job: str, service: str, role: str) -> Launch:
    """One process per pod: the pserver Job has e.pservers pods, the trainer Job e.max_nodes; the prelude sets
    the per-pod variables (PADDLE_PER_POD) from the pod index."""
    static = {k: v for k, v in paddle_env(e, job=job, service=service, role=role, index=0).items()
              if k not in PADDLE_PER_POD}
    _, ps_job = paddle_job_names(job)
    host = f"{ps_job}-${{JOB_COMPLETION_INDEX}}.{service}"
    prelude = (f'export POD_IP="{host}" SERVER_ENDPOINT="{host}:{PADDLE_PORT}"' if role == "PSERVER" else
               'export TRAINER_INDEX="${JOB_COMPLETION_INDEX}" PADDLE_TRAINER_ID="${JOB_COMPLETION_INDEX}"')
    argv, launched = entry_command(e, env, nodes=e.pservers if role == "PSERVER" else e.max_nodes, procs_per_node=1)
    return Launch(argv=argv, env=static, prelude=prelude, port=PADDLE_PORT, launched=launched)
