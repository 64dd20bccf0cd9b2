"""The launch builder of an experiment's framework: one per room of this package, as ``workloads/train/`` has
one room per framework for what its pods run."""

from __future__ import annotations

from core.config.model import Experiment
from infra.environment import Environment
from workloads.launch.common import Launch
from workloads.launch.horovod import horovod_launch
from workloads.launch.paddle import paddle_launch
from workloads.launch.pytorch import pytorch_launch
from workloads.launch.tensorflow import tensorflow_launch


def launch_for(e: Experiment, env: Environment, *, job: str, service: str, gpus: int,
               role: str = "TRAINER", instance_type: str | None = None) -> Launch:
    """The framework's launch contract; ``role`` matters for paddle only (PSERVER|TRAINER)."""
    if e.framework == "pytorch":
        return pytorch_launch(e, env, job=job, service=service, gpus=gpus, instance_type=instance_type)
    if e.framework == "tensorflow":
        return tensorflow_launch(e, env, job=job, service=service, gpus=gpus)
    if e.framework == "horovod":
        return horovod_launch(e, env, job=job, service=service, gpus=gpus)
    if e.framework == "paddle":
        return paddle_launch(e, env, job=job, service=service, role=role)
    raise ValueError(f"framework={e.framework!r}: no launch contract; use one of pytorch, horovod, tensorflow, paddle")
