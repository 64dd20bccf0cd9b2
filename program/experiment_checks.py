"""Meaning rules of the experiments: unique names, each on a GPU node group it fits (GPUs per node, nodes,
precision, fabric), a language model's keys (``program.language_model_checks``), its dataset in the catalog and its
framework/workload pairing (``workloads.framework_support``), Kubernetes object names no two runs share, and
parallel experiments that fit their group's GPUs together.
``program.validation.meaning_problems`` runs them with the others."""

from __future__ import annotations

from core.catalog import aws as catalog
from core.catalog.peaks import NO_BF16
from core.config.fields import problem, show
from core.config.model import Experiment, GpuNodeGroup, StackConfig
from datasets.catalog import DATASET_NAMES
from program.language_model_checks import language_model_problems
from workloads.framework_support import check_experiment
from workloads.object_names import object_names


def experiment_problems(cfg: StackConfig) -> list[str]:
    """Each experiment: a unique name, a GPU node group it fits, a dataset in the catalog, its framework's rules."""
    out, seen = [], set()
    groups = cfg.node_groups
    for i, e in enumerate(cfg.experiments):
        key = cfg.experiment_key(i)
        if e.name in seen:
            out.append(problem(f"{key}.name", e.name, "must be unique among experiments", f'"{e.name}-2"'))
        seen.add(e.name)
        group = groups.get(e.node_group)
        if group is None:
            out.append(problem(f"{key}.node_group", e.node_group,
                               f"must name a GPU node group: {', '.join(groups)}", show(cfg.gpu_node_groups[0].name)))
        else:
            out += _fits(key, e, group)
        out += language_model_problems(key, e, group)
        if e.dataset not in DATASET_NAMES:
            out.append(problem(f"{key}.dataset", e.dataset, f"must be one of {', '.join(DATASET_NAMES)}",
                               show(DATASET_NAMES[0])))
        else:
            out += [f"{key}.{p}" for p in check_experiment(e)]
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
    if e.fabric == "strict" and not group.efa:
        out.append(problem(f"{key}.fabric", e.fabric, f"judges NCCL's EFA transport, and node group {group.name!r} "
                           f"({group.instance_type}) has no EFA; use it on an EFA group, or \"check\"", '"check"'))
    if e.max_nodes > group.max_size:
        nodes = f"{e.min_nodes}:{e.max_nodes}" if e.elastic else e.max_nodes
        out.append(problem(f"{key}.nodes", nodes, f"needs {e.max_nodes} nodes but node group {group.name!r} has "
                           f"max_size {group.max_size}", str(group.max_size)))
    return out


# How a message names each object of a run (the roles of object_names.object_names).
OBJECT_ROLES = {"svc": "Service", "job": "training Job", "pserver": "pserver Job", "eval": "evaluation Job",
                "eval-gate": "evaluation gate", "gate": "gate Job and its RBAC"}


def name_collisions(cfg: StackConfig) -> list[str]:
    """No two runs (experiments and their repeats) give a Kubernetes object the same name.

    Each name is a valid label on its own (``core.contract.k8s_names``), and one that had to be cut or changed ends
    with a hash of its parts; but two names that need no change can still join to the same text: "a-r1"
    and "a" repeat 1 with run id "r1" are both "a-r1-r1", and experiment "a-eval" trains in the Job
    "a-eval-eval" that is also the evaluation Job of "a" with run id "eval". The second object would
    replace or be refused by the first. Experiments that share a name are reported by ``experiment_problems``.
    """
    out, first = [], {}  # name -> (experiment index, run, roles of that run with the name)
    reported = set()
    for i, e in enumerate(cfg.experiments):
        for run in e.runs():
            mine: dict[str, list[str]] = {}
            for role, name in object_names(run, cfg.run_id).items():
                mine.setdefault(name, []).append(role)
            for name, roles in mine.items():
                j, other, other_roles = first.setdefault(name, (i, run, roles))
                if (j, other) == (i, run) or other.name == run.name or (j, other, i, run) in reported:
                    continue
                reported.add((j, other, i, run))
                what = lambda rs: " and ".join(OBJECT_ROLES[r] for r in rs)  # noqa: E731
                out.append(problem(
                    f"{cfg.experiment_key(i)}.name", e.name,
                    f"the {what(roles)} of {show(run.label)} would be named {show(name)} (run id {show(cfg.run_id)}), "
                    f"and so would the {what(other_roles)} of {cfg.experiment_key(j)} {show(other.label)}: Kubernetes "
                    f"names in one namespace must be unique; rename one", show(f"{e.name[:30]}-2")))
    return out


def parallel_gpu_problems(cfg: StackConfig) -> list[str]:
    """With ``execution: parallel`` every experiment's Jobs start at once: the experiments on one node
    group must fit its GPUs at max_size, each at its largest (max_nodes x gpus_per_node).

    Otherwise the pods that land first keep the others Pending, and a Job's activeDeadlineSeconds
    counts from its start, Pending included (Kubernetes Job docs, "Job termination and cleanup"), so the
    starved experiment times out without training. An experiment's evaluation pod (one GPU) starts only
    after its own training ends and so never adds to it; paddle pservers request no GPU.
    """
    if cfg.execution != "parallel":
        return []
    out = []
    for g in cfg.gpu_node_groups:
        mine = [e for e in cfg.experiments if e.node_group == g.name]
        asked = sum(e.max_nodes * e.gpus_per_node for e in mine)
        have = g.max_size * g.gpus_per_node
        if len(mine) < 2 or asked <= have:
            continue
        each = ", ".join(f"{e.name} ({e.max_nodes} x {e.gpus_per_node})" for e in mine)
        out.append(problem("execution", cfg.execution,
                           f"experiments {each} run at once on node group {g.name!r} and ask {asked} GPUs, but it "
                           f"has {have} at max_size ({g.max_size} x {g.instance_type} with {g.gpus_per_node} each); "
                           f"set execution: sequential, or move an experiment to another node group (gpu_node_groups)",
                           '"sequential"'))
    return out
