"""TensorFlow's launch: one MultiWorkerMirroredStrategy worker per pod, its ``TF_CONFIG`` built from the pod index
(the pods' side: ``workloads/train/tensorflow/``)."""

from __future__ import annotations

import json

from core.config.model import Experiment
from core.contract.names import ENV_FRAMEWORK, ENV_TF_WORKERS
from infra.environment import Environment
from workloads.launch.common import Launch, entry_command
from workloads.object_names import pod_host

TF_PORT = 2222  # conventional MultiWorkerMirroredStrategy worker port


def tf_workers(job: str, service: str, nodes: int) -> list[str]:
    """Every worker's ``host:port``, pod 0 first."""
    return [f"{pod_host(job, i, service)}:{TF_PORT}" for i in range(nodes)]


def tf_config(workers: list[str], index: int) -> str:
    """TF_CONFIG for MultiWorkerMirroredStrategy worker ``index`` (compact JSON, as the prelude prints it)."""
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}},
                      separators=(",", ":"))


def tensorflow_launch(e: Experiment, env: Environment, *, job: str, service: str, gpus: int) -> Launch:
    """One worker process per pod: MultiWorkerMirroredStrategy drives the pod's GPUs."""
    workers = json.dumps(tf_workers(job, service, e.max_nodes), separators=(",", ":"))
    # Same bytes as tf_config(workers, index): the worker list comes from the env, the index from the Job.
    prelude = (f'export TF_CONFIG="{{\\"cluster\\":{{\\"worker\\":${{{ENV_TF_WORKERS}}}}},'
               '\\"task\\":{\\"type\\":\\"worker\\",\\"index\\":${JOB_COMPLETION_INDEX}}}"')
    argv, launched = entry_command(e, env, nodes=e.max_nodes, procs_per_node=1)
    return Launch(argv=argv, prelude=prelude, port=TF_PORT, launched=launched,
                  env={ENV_FRAMEWORK: "tensorflow", ENV_TF_WORKERS: workers})
