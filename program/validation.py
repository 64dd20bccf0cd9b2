"""The second validation stage, meaning: one function that returns every problem, run once.

``spec.shape`` has checked keys, types and single values. Here the rules that relate values
to each other and to the world: node group sizes (min <= desired <= max), EFA on a type
that has it, an existing VPC with two private subnets, FSx-only options, unique names, each
experiment's node group, nodes and GPUs, its dataset in the catalog, its framework/workload
pairing (``workloads.contracts``), the region's instance offerings and the shipped entry
points. It runs only on a config whose shape is clean, so a default that stood in for a bad
value is never judged. ``program.stack`` calls it before registering any resource; ``bench``
calls it (without offerings) before a local run.
"""

from __future__ import annotations

from typing import Any, Mapping

from datasets.catalog import DATASET_NAMES
from infra.offerings import offering_problems
from spec import aws_catalog as catalog
from spec.config import Experiment, GpuNodeGroup, StackConfig
from spec.fields import ConfigError, problem, show
from spec.shape import parse_stack_config
from workloads import contracts
from workloads.train.peaks import NO_BF16


def meaning_problems(cfg: StackConfig, *, offered: Mapping[str, set[str]] | None = None,
                     code_files: Mapping[str, str] | None = None) -> list[str]:
    """Every meaning problem of a shape-clean config. ``offered`` (instance type -> zones) and
    ``code_files`` (the shipped sources) are checked when given."""
    problems = _node_groups(cfg) + _network(cfg) + _storage(cfg) + _experiments(cfg)
    if offered is not None:
        problems += offering_problems(cfg, offered)
    if code_files is not None:
        problems += contracts.missing_entry_points(cfg.experiments, code_files)
    return problems


def validated_config(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None,
                     offered: Mapping[str, set[str]] | None = None,
                     code_files: Mapping[str, str] | None = None) -> StackConfig:
    """Shape, then (only if the shape is clean) meaning. Raises ConfigError with every problem of the stage."""
    cfg = parse_stack_config(raw, project=project, stack=stack, region=region)
    problems = meaning_problems(cfg, offered=offered, code_files=code_files)
    if problems:
        raise ConfigError(problems)
    return cfg


def _sizes(key: str, min_size: int, max_size: int, desired: int, *, desired_example: int) -> list[str]:
    if max_size < min_size:
        return [problem(f"{key}.max_size", max_size, f"must be >= min_size ({min_size})", str(max(min_size, 1)))]
    if not min_size <= desired <= max_size:
        return [problem(f"{key}.desired_size", desired,
                        f"must be between min_size ({min_size}) and max_size ({max_size})", str(desired_example))]
    return []


def _node_groups(cfg: StackConfig) -> list[str]:
    out, seen = [], set()
    for i, g in enumerate(cfg.gpu_node_groups):
        key = f"gpu_node_groups[{i}]"
        if g.name in seen:
            out.append(problem(f"{key}.name", g.name, "must be unique among gpu_node_groups", '"gpu-b"'))
        seen.add(g.name)
        out += _sizes(key, g.min_size, g.max_size, g.desired_size, desired_example=g.max_size)
        if g.efa and not catalog.INSTANCE_TYPES[g.instance_type].efa:
            out.append(problem(f"{key}.efa", True, f'{g.instance_type} does not support EFA; use "auto" or false',
                               '"auto"'))
    s = cfg.system_nodes
    return out + _sizes("system_nodes", s.min_size, s.max_size, s.desired_size, desired_example=s.min_size)


def _network(cfg: StackConfig) -> list[str]:
    n = cfg.network
    if n.existing_vpc_id and len(n.existing_private_subnet_ids) < 2:
        return [problem("network.existing.private_subnet_ids", list(n.existing_private_subnet_ids),
                        "an existing VPC needs at least two private subnets in different AZs (EKS requires two AZs)",
                        '["subnet-0a...", "subnet-0b..."]')]
    return []


def _storage(cfg: StackConfig) -> list[str]:
    if cfg.storage.preload and cfg.storage.kind != "fsx":
        return [problem("storage.preload", True, f'applies to storage.kind "fsx" only (kind is '
                        f'{show(cfg.storage.kind)}); remove it', "storage.kind: fsx")]
    return []


def _experiments(cfg: StackConfig) -> list[str]:
    out, seen = [], set()
    groups = cfg.node_groups
    for i, e in enumerate(cfg.experiments):
        key = f"experiments[{i}]"
        if e.name in seen:
            out.append(problem(f"{key}.name", e.name, "must be unique among experiments", f'"{e.name}-2"'))
        seen.add(e.name)
        group = groups.get(e.node_group)
        if group is None:
            out.append(problem(f"{key}.node_group", e.node_group,
                               f"must name a GPU node group: {', '.join(groups)}", show(cfg.gpu_node_groups[0].name)))
        else:
            out += _fits(key, e, group)
        if e.dataset not in DATASET_NAMES:
            out.append(problem(f"{key}.dataset", e.dataset, f"must be one of {', '.join(DATASET_NAMES)}",
                               show(DATASET_NAMES[0])))
        else:
            out += [f"{key}.{p}" for p in contracts.check_experiment(e)]
    return out


def _fits(key: str, e: Experiment, group: GpuNodeGroup) -> list[str]:
    """The experiment's pods fit its node group: GPUs per node, nodes within max_size, and a
    precision its GPUs have (bf16 needs Ampere or later: not V100 or T4)."""
    out = []
    model = catalog.INSTANCE_TYPES[group.instance_type].gpu_model
    if e.precision == "bf16" and model in NO_BF16:
        out.append(problem(f"{key}.precision", e.precision, f"{model} GPUs ({group.instance_type}, node group "
                           f"{group.name!r}) have no bf16 support; use amp-fp16 there, or bf16 on A10G, L4, L40S, "
                           f"A100, H100 or H200", '"amp-fp16"'))
    if e.gpus_per_node > group.gpus_per_node:
        out.append(problem(f"{key}.gpus_per_node", e.gpus_per_node, f"must be <= {group.gpus_per_node}",
                           str(group.gpus_per_node)))
    if e.max_nodes > group.max_size:
        nodes = f"{e.min_nodes}:{e.max_nodes}" if e.elastic else e.max_nodes
        out.append(problem(f"{key}.nodes", nodes, f"needs {e.max_nodes} nodes but node group {group.name!r} has "
                           f"max_size {group.max_size}", str(group.max_size)))
    return out
