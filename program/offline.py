"""The whole program evaluated offline: what ``pulumi up -s <stack>`` would register, without AWS.

Runs ``program.stack.export_stack`` (what ``__main__.py``, the program ``pulumi up`` runs, calls with
Pulumi's config) under Pulumi's mock engine (``program.mocks``), records every registration with its
parent, provider and dependencies, the stack's outputs and the warnings the program logs, and estimates
the hourly cost and the provisioning time (critical path of the dependency graph, ``infra.cluster.estimate``).
``bench plan`` prints it; the tests of the whole program read it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config.fields import ConfigError
from core.config.overrides import Overrides, SetError
from infra.labels import SKIP_AWAIT_ANNOTATION
from program.stack_files import PROJECT, ROOT


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().strip())


@dataclass
class Plan:
    stack: str
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]
    warnings: list[str]
    estimate: dict[str, Any]
    seconds: float
    cost_items: dict[str, float] = field(default_factory=dict)
    # The outputs whose value the mock engine made up in part or whole (program.mocks.placeholder_outputs)
    placeholders: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "resources": self.resources, "outputs": self.outputs,
                "placeholders": self.placeholders, "warnings": self.warnings, "estimate": self.estimate}


def evaluate(stack: str, root: Path = ROOT, mocks=None, monitor=None, today: str | None = None,
             overrides: Overrides = Overrides()) -> Plan:
    """Run the program for ``stack`` (Pulumi.<stack>.yaml) under the mock engine, with the command line's
    ``overrides`` (``--set``, ``--experiment``) as ``__main__.py`` applies them. Raises ConfigError.

    The mock engine drives an asyncio loop of its own; where this thread already runs one (a
    Jupyter kernel), the plan is evaluated on a worker thread instead.
    """
    import asyncio

    from program.stack_files import read_stack_yaml

    config = read_stack_yaml(stack, root)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return evaluate_config(stack, config, mocks=mocks, monitor=monitor, today=today, overrides=overrides)
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    # In a copy of this thread's context, where a plan run here would find Pulumi's settings (context variables,
    # pulumi/_utils.py ContextProperty): a fresh thread's context starts without them and falls back to defaults
    # that a plan failed earlier in the process could leave holding its pending outputs, bound to its closed loop,
    # and the run waited for them for ever.
    with ThreadPoolExecutor(1, thread_name_prefix="eksbench-plan") as pool:
        return pool.submit(contextvars.copy_context().run, evaluate_config, stack, config, mocks=mocks,
                           monitor=monitor, today=today, overrides=overrides).result()


def evaluate_config(stack: str, stack_config: dict[str, Any], *, mocks=None, monitor=None,
                    today: str | None = None, overrides: Overrides = Overrides()) -> Plan:
    """Like ``evaluate``, for a stack file's ``config:`` mapping given in memory. ``today`` (ISO date):
    the clock for the EKS version calendar; None is the system clock, read here."""
    import datetime

    from program.mocks import placeholder_outputs

    today = today or datetime.date.today().isoformat()
    pulumi_config = _pulumi_config(stack_config, overrides)
    started = time.perf_counter()
    cfg, monitor, warnings = _run(stack, pulumi_config, mocks=mocks, monitor=monitor, today=today,
                                  overrides=overrides)
    seconds = time.perf_counter() - started
    regs = monitor.registrations
    items, estimate = _estimate(cfg, regs, today)
    placeholders = placeholder_outputs(monitor.stack_outputs, getattr(monitor.mocks, "invented", set()))
    return Plan(stack=stack, resources=[r.as_json() for r in regs], outputs=monitor.stack_outputs,
                warnings=warnings, estimate=estimate, seconds=seconds, cost_items=items,
                placeholders=placeholders)


def _pulumi_config(stack_config: dict[str, Any], overrides: Overrides) -> dict[str, Any]:
    """The stack file's config as Pulumi would hand it to the program, the command line's ``--set`` applied."""
    from core.config.pulumi_config import to_pulumi_config

    try:
        return overrides.apply(to_pulumi_config(stack_config))
    except SetError as e:
        raise ConfigError([str(e)]) from None


def _run(stack: str, pulumi_config: dict[str, Any], *, mocks, monitor, today: str,
         overrides: Overrides) -> tuple[Any, Any, list[str]]:
    """The program under the mock engine: the config it built, the monitor that recorded it, the warnings it logged."""
    from core.config.pulumi_config import decode_config
    from program.mock_run import run_program
    from program.stack import export_stack

    raw, region = decode_config(pulumi_config)
    built = []
    collect = _Collect()
    logger = logging.getLogger(f"eksbench.plan.{stack}")
    logger.propagate = False
    logger.handlers[:] = [collect]
    # The very function __main__.py runs; a ConfigError comes out of it typed, before any registration.
    try:
        monitor = run_program(lambda: built.append(export_stack(raw, project=PROJECT, stack=stack, region=region,
                                                                  today=today, experiment=overrides.experiment)),
                              project=PROJECT, stack=stack, config=pulumi_config, mocks=mocks, logger=logger,
                              monitor=monitor)
    except ConfigError as e:
        raise ConfigError(overrides.annotate(e.problems)) from None
    return built[0], monitor, collect.messages


def _estimate(cfg: Any, regs: list, today: str) -> tuple[dict[str, float], dict[str, Any]]:
    """The hourly cost items and the plan's estimate: cost, provisioning time and its critical path, and for an
    experiment stack each run's first step, learning rates, GPU defaults, a sweep's idle nodes and each language
    model's parameters, memory per GPU, tokens/s and cost of a billion tokens (program.language_model_estimate)."""
    from core.config.model import StackConfig
    from infra.cluster.estimate import (
        DURATIONS,
        Node,
        critical_path,
        hourly_cost,
        minutes_for,
        sweep_idle,
    )
    from program.language_model_estimate import language_model_rows

    nodes = [Node(urn=r.urn, type=r.type, parent=r.parent, dependencies=tuple(r.dependencies), custom=r.custom,
                  skip_await=((r.inputs.get("metadata") or {}).get("annotations") or {}).get(SKIP_AWAIT_ANNOTATION) == "true")
             for r in regs]
    minutes, path = critical_path(nodes)
    nat = sum(1 for r in regs if r.type == "aws:ec2/natGateway:NatGateway")
    # A home stack (core.config.model.HomeConfig) bills by use only (S3 and ECR storage): nothing per hour.
    items = hourly_cost(cfg, nat_gateways=nat, today=today) if isinstance(cfg, StackConfig) else {}
    estimate = {
        **cost_estimate(cfg, items),
        "provision_minutes": minutes,
        "critical_path": [{"urn": n.urn, "type": n.type, "minutes": minutes_for(n),
                           "source": DURATIONS.get(n.type, (0, "API call"))[1] or "API call"} for n in path],
    }
    if isinstance(cfg, StackConfig):
        estimate["first_step"] = first_steps(cfg, nodes)
        estimate["lr_schedules"] = lr_schedules(cfg)
        estimate["gpu_defaults"] = gpu_defaults(cfg)
        estimate["language_models"] = language_model_rows(cfg)
        estimate["sweep_idle"] = sweep_idle(cfg)
    return items, estimate


def cost_estimate(cfg: Any, items: dict[str, float | None]) -> dict[str, Any]:
    """The plan's cost: ``hourly_cost_usd`` (None where an instance type has no price in the region), the
    types with no price (``unpriced``, named), and where each kind of price comes from (``prices``)."""
    from core.catalog import aws as catalog
    from core.config.model import StackConfig
    from infra.cluster.estimate import total, unpriced

    if not isinstance(cfg, StackConfig):  # a home stack bills by use only (S3 and ECR storage): nothing per hour
        return {"hourly_cost_usd": 0.0, "unpriced": [], "prices": {}, "storage_prices": storage_prices(cfg.region)}
    return {"hourly_cost_usd": total(items), "unpriced": unpriced(cfg),
            "prices": {"instances": catalog.price_label(cfg.region), "other": catalog.OTHER_PRICES}}


def storage_prices(region: str) -> dict[str, Any]:
    """What a home stack's bucket bills by use in ``region``: S3 Standard storage per GB-month and requests per
    1,000, with their source (core.catalog.aws.S3_STANDARD_PRICES); the figures are None where the catalog has no
    price for the region, and ``source`` says where AWS publishes them."""
    from core.catalog import aws as catalog

    found = catalog.S3_STANDARD_PRICES.get(region)
    return {"region": region,
            "s3_usd_per_gb_month": found.usd_per_gb_month if found else None,
            "s3_usd_per_1000_put_copy_post_list": found.usd_per_1000_writes if found else None,
            "s3_usd_per_1000_get_and_other": found.usd_per_1000_reads if found else None,
            "source": found.source if found else f"no S3 price for {region} in eksbench's catalog: "
                                                 f"{catalog.S3_PRICING_PAGE}"}


class _NoPaths:
    """A ``workloads.launch.common.TrainPaths`` for arguments whose paths nobody reads (the schedule)."""
    datasets_dir = ""

    def experiment_results_dir(self, experiment: Any) -> str:
        return ""


def lr_schedules(cfg: Any) -> list[dict[str, Any]]:
    """Per experiment the trainer trains (PyTorch, Horovod): its learning rate at full size and the warm-up it
    gets (workloads.train.common.schedule: the workload's own, or the large-batch one above a global batch of 1024)."""
    from core.catalog.workload_facts import WORKLOADS
    from core.config.gpu_defaults import TORCH_FRAMEWORKS
    from core.contract.train_args import apply_train_args
    from workloads.launch.common import train_args_for
    from workloads.train.common.schedule import default_lr, warmup_note

    out = []
    for e in cfg.experiments:
        if WORKLOADS[e.workload].collective or e.framework not in TORCH_FRAMEWORKS:
            continue
        args = apply_train_args(train_args_for(e, _NoPaths()), e.args)
        if args is None:
            continue
        world = e.max_nodes * e.gpus_per_node
        out.append({"experiment": e.name, "global_batch": args.batch_size * world, "lr": default_lr(args, world),
                    "warmup": warmup_note(args, world)})
    return out


def gpu_defaults(cfg: Any) -> list[dict[str, Any]]:
    """Per experiment, on its GPU nodes: whether it compiles and which input path feeds it, each with the
    reason (core.config.gpu_defaults; an explicit ``compile`` in the stack file wins). ``input_path`` is one of
    ``core.config.gpu_defaults.INPUT_PATHS``; ``workers`` its DataLoader workers per process; ``notes`` what its
    pods do differently in that shape, which only the hardware can show."""
    from core.config.gpu_defaults import EFA_FORK_NOTE, INPUT_PATHS, compile_choice, forks_loader_workers, input_path
    from workloads.launch.common import loader_workers

    out = []
    for e in cfg.experiments:
        group = cfg.node_group_for(e)
        workers = loader_workers(group.instance_type, e.gpus_per_node)
        compiled = compile_choice(e, gpu=True, instance_type=group.instance_type)
        fed = input_path(e, gpu=True, workers=workers)
        notes = [EFA_FORK_NOTE] if group.efa and forks_loader_workers(e) else []
        out.append({"experiment": e.label, "compile": compiled.value, "compile_reason": compiled.reason,
                    "input_path": fed.value, "input_path_label": INPUT_PATHS[fed.value], "input_reason": fed.reason,
                    "workers": workers, "notes": notes})
    return out


def first_steps(cfg: Any, nodes: list) -> list[dict[str, Any]]:
    """Per run of each experiment, in the order they run: when its Job exists, its GPU nodes joined and its
    image is pulled (``infra.cluster.estimate``). A run that waits for another (``execution: sequential``, or
    a repeat after the one before it; ``workloads.experiment_suite_component.run_order``) starts once that one ends, at
    a time the plan cannot know: ``after`` names it, ``image_running`` is None, ``not_before`` is when the
    run it waits for starts, and ``latest_running`` adds the longest the runs before it may take (their
    timeouts, evaluation and start-up) to when its own first pod could run."""
    from core.catalog import compat
    from core.contract.names import repeat_suffix
    from infra.cluster.estimate import finish_times, first_step_minutes
    from workloads.experiment_suite_component import run_order

    finish = finish_times(nodes)
    by_name = {n.urn.rsplit("::", 1)[-1]: n.urn for n in nodes}
    out: list[dict[str, Any]] = []
    earliest: dict[str, float | None] = {}
    for prior, run, waited in run_order(cfg.experiments, cfg.execution):
        # resource names: infra/cluster/node_group.py f"{name}-ng" of program/stack.py's f"gpu-{group}"; the suite's
        # f"{name}-job" of workloads/training_job_component.py (the suite names its children experiments-<run>[-r<k>])
        suffix = repeat_suffix(run.repeat) if run.repeat else ""
        job = next((urn for name, urn in by_name.items() if name.endswith(f"-{run.name}{suffix}-job")), None)
        group = by_name.get(f"gpu-{run.node_group}-ng")
        if job is None or group is None:
            continue
        row = compat.find_image(run.image)
        times = first_step_minutes(job_created=finish[job], nodes_joined=finish[group],
                                   image_mb=row.size_mb if row else None)
        own = times["image_running"]
        not_before = earliest.get(prior.label) if prior is not None else None
        earliest[run.label] = max(own, not_before) if own is not None and not_before is not None else own
        gated = {"image_running": None, "not_before": not_before} if prior is not None else {}
        out.append({"experiment": run.label, "image": run.image, "image_mb": row.size_mb if row else None,
                    **times, **gated, "after": prior.label if prior is not None else None, "waits_at_most": waited,
                    "latest_running": round(own + waited, 1) if own is not None else None})
    return out
