"""The second validation stage, meaning: one function that returns every problem, run once.

``core.config.shape`` has checked keys, types and single values. Here the rules that relate values
to each other and to the world, each in the module named for what it checks: the region, the
cluster's endpoint and version and the network's zones (``program.cluster_checks``); node group
sizes, EFA, Capacity Blocks and zones (``program.node_group_checks``); the shared volume and where
results and datasets live (``program.storage_checks``); each experiment's node group, nodes and
GPUs, dataset, framework/workload pairing and Kubernetes object names
(``program.experiment_checks``, a language model's in ``program.language_model_checks``, whose memory rule judges
the cluster's node groups only); each image against its GPUs (``program.image_checks``); then the
autostop deadline, the region's instance offerings and the shipped entry points. It runs only on
a config whose shape is clean, so a default that stood in for a bad value is never judged.
``program.stack`` calls it before registering any resource; ``bench`` calls it (without
offerings) before a local run.
"""

from __future__ import annotations

from typing import Any, Mapping

from core.config.autostop import deadline_problems
from core.config.fields import ConfigError
from core.config.model import StackConfig
from core.config.overrides import select
from core.config.shape import parse_stack_config
from infra.cluster.offerings import offering_problems
from program.cluster_checks import cluster_problems, network_problems, region_problems
from program.experiment_checks import experiment_problems, name_collisions, parallel_gpu_problems
from program.image_checks import gpu_training_problems, image_problems
from program.language_model_checks import memory_problems
from program.node_group_checks import node_group_problems
from program.storage_checks import fsx_deployment_problems, results_bucket_problems, storage_problems
from workloads.framework_support import missing_entry_points


def meaning_problems(cfg: StackConfig, *, offered: Mapping[str, set[str]] | None = None,
                     code_files: Mapping[str, str] | None = None, today: str | None = None,
                     zones: Mapping[str, str] | None = None, cluster: bool = True) -> list[str]:
    """Every meaning problem of a shape-clean config. ``offered`` (instance type -> zones),
    ``code_files`` (the shipped sources), ``today`` (ISO date: the caller's clock, for the EKS
    version calendar) and ``zones`` (the region's usable zone names -> zone ids) are checked when given.
    ``cluster``: the config is for the cluster (the program, ``bench run``, preflight); False for a local run and
    for commands that only read results, which need not refuse what only the cluster cannot run."""
    problems = (region_problems(cfg) + cluster_problems(cfg, today, cluster) + node_group_problems(cfg)
                + network_problems(cfg, zones) + storage_problems(cfg) + results_bucket_problems(cfg, cluster)
                + experiment_problems(cfg) + name_collisions(cfg) + image_problems(cfg)
                + (gpu_training_problems(cfg) + memory_problems(cfg) if cluster else []))
    problems += fsx_deployment_problems(cfg) + parallel_gpu_problems(cfg) + deadline_problems(cfg)
    if offered is not None:
        problems += offering_problems(cfg, offered)
    if code_files is not None:
        problems += missing_entry_points(cfg.experiments, code_files)
    return list(dict.fromkeys(problems))  # the experiments of one sweep (core.config.sweep) share their entry's key


def validated_config(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None,
                     offered: Mapping[str, set[str]] | None = None,
                     code_files: Mapping[str, str] | None = None, today: str | None = None,
                     cluster: bool = True, experiment: str | None = None) -> StackConfig:
    """Shape, then (only if the shape is clean) meaning. Raises ConfigError with every problem of the stage.
    ``experiment``: only that one is kept (``eksbench run --experiment``) and judged, as the program judges it."""
    cfg = select(parse_stack_config(raw, project=project, stack=stack, region=region), experiment)
    problems = meaning_problems(cfg, offered=offered, code_files=code_files, today=today, cluster=cluster)
    if problems:
        raise ConfigError(problems)
    return cfg
