"""``python -m bench plan <stack>``: what ``pulumi up -s <stack>`` would build, offline.

Runs ``program.stack.export_stack`` (what ``__main__.py``, the program ``pulumi up`` runs,
calls with Pulumi's config) under Pulumi's mock engine, records every registration with its parent, provider and dependencies, and
reports the resources, the outputs, the warnings, the estimated hourly cost and the
estimated provisioning time (critical path of the dependency graph).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import config_error
from bench.stack_files import PROJECT, ROOT
from infra.labels import SKIP_AWAIT_ANNOTATION


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="show what `pulumi up` would create, its cost per hour and build time")
    p.add_argument("stack", help="stack name (reads Pulumi.<stack>.yaml)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=main)


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

    def as_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "resources": self.resources, "outputs": self.outputs,
                "warnings": self.warnings, "estimate": self.estimate}


def evaluate(stack: str, root: Path = ROOT, mocks=None, monitor=None, today: str | None = None) -> Plan:
    """Run the program for ``stack`` (Pulumi.<stack>.yaml) under the mock engine. Raises ConfigError.

    The mock engine drives an asyncio loop of its own; where this thread already runs one (a
    Jupyter kernel), the plan is evaluated on a worker thread instead.
    """
    import asyncio

    from bench.stack_files import read_stack_yaml

    config = read_stack_yaml(stack, root)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return evaluate_config(stack, config, mocks=mocks, monitor=monitor, today=today)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="eksbench-plan") as pool:
        return pool.submit(evaluate_config, stack, config, mocks=mocks, monitor=monitor, today=today).result()


def evaluate_config(stack: str, stack_config: dict[str, Any], *, mocks=None, monitor=None,
                    today: str | None = None) -> Plan:
    """Like ``evaluate``, for a stack file's ``config:`` mapping given in memory. ``today`` (ISO date):
    the clock for the EKS version calendar; None is the system clock, read here."""
    import datetime

    from bench.mocks import run_program
    from infra.estimate import DURATIONS, Node, critical_path, hourly_cost, minutes_for
    from program.stack import export_stack
    from spec.config import StackConfig
    from spec.pulumi_config import decode_config, to_pulumi_config

    today = today or datetime.date.today().isoformat()
    pulumi_config = to_pulumi_config(stack_config)
    raw, region = decode_config(pulumi_config)
    built = []
    started = time.perf_counter()
    collect = _Collect()
    logger = logging.getLogger(f"eksbench.plan.{stack}")
    logger.propagate = False
    logger.handlers[:] = [collect]
    # The very function __main__.py runs; a ConfigError comes out of it typed, before any registration.
    monitor = run_program(lambda: built.append(export_stack(raw, project=PROJECT, stack=stack, region=region,
                                                              today=today)),
                          project=PROJECT, stack=stack, config=pulumi_config, mocks=mocks, logger=logger,
                          monitor=monitor)
    cfg = built[0]
    seconds = time.perf_counter() - started
    regs = monitor.registrations
    nodes = [Node(urn=r.urn, type=r.type, parent=r.parent, dependencies=tuple(r.dependencies), custom=r.custom,
                  skip_await=((r.inputs.get("metadata") or {}).get("annotations") or {}).get(SKIP_AWAIT_ANNOTATION) == "true")
             for r in regs]
    minutes, path = critical_path(nodes)
    nat = sum(1 for r in regs if r.type == "aws:ec2/natGateway:NatGateway")
    # A home stack (spec.config.HomeConfig) bills by use only (S3 and ECR storage): nothing per hour.
    items = hourly_cost(cfg, nat_gateways=nat, today=today) if isinstance(cfg, StackConfig) else {}
    estimate = {
        "hourly_cost_usd": round(sum(items.values()), 2),
        "provision_minutes": minutes,
        "critical_path": [{"urn": n.urn, "type": n.type, "minutes": minutes_for(n),
                           "source": DURATIONS.get(n.type, (0, "API call"))[1] or "API call"} for n in path],
    }
    if isinstance(cfg, StackConfig):
        estimate["first_step"] = first_steps(cfg, nodes)
    return Plan(stack=stack, resources=[r.as_json() for r in regs], outputs=monitor.stack_outputs,
                warnings=collect.messages, estimate=estimate, seconds=seconds, cost_items=items)


def first_steps(cfg: Any, nodes: list) -> list[dict[str, Any]]:
    """Per experiment: when its Job exists, its GPU nodes joined and its image is pulled (``infra.estimate``)."""
    from infra.estimate import first_step_minutes, finish_times
    from spec import compat

    finish = finish_times(nodes)
    by_name = {n.urn.rsplit("::", 1)[-1]: n.urn for n in nodes}
    out = []
    for e in cfg.experiments:
        # resource names: infra/node_group.py f"{name}-ng" of program/stack.py's f"gpu-{group}"; the suite's
        # f"{name}-job" of workloads/training_job.py (the suite names its children experiments-<experiment>)
        job = next((urn for name, urn in by_name.items() if name.endswith(f"-{e.name}-job")), None)
        group = by_name.get(f"gpu-{e.node_group}-ng")
        if job is None or group is None:
            continue
        row = compat.find_image(e.image)
        out.append({"experiment": e.name, "image": e.image, "image_mb": row.size_mb if row else None,
                    **first_step_minutes(job_created=finish[job], nodes_joined=finish[group],
                                         image_mb=row.size_mb if row else None)})
    return out


def render(plan: Plan) -> str:
    from spec import aws_catalog as catalog

    lines = [f"eksbench plan for stack {plan.stack!r}: evaluated __main__.py under Pulumi's mock engine "
             f"in {plan.seconds:.1f} s; nothing was created."]
    custom = [r for r in plan.resources if not r["type"].startswith("eksbench:")]
    lines.append(f"\nResources ({len(custom)}, plus {len(plan.resources) - len(custom)} eksbench components):")
    for typ, n in sorted(Counter(r["type"] for r in custom).items()):
        lines.append(f"  {n:3d}  {typ}")
    lines.append("\nOutputs:")
    width = max(map(len, plan.outputs), default=0)
    for key, value in plan.outputs.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        lines.append(f"  {key:<{width}}  {shown}")
    if plan.warnings:
        lines.append("\nWarnings:")
        lines += [f"  ! {w}" for w in plan.warnings]
    est = plan.estimate
    lines.append(f"\nEstimated cost: ${est['hourly_cost_usd']:.2f}/hour on demand "
                 f"({catalog.PRICES_REGION} list prices as of {catalog.PRICES_AS_OF}; approximate)")
    lines += [f"  ${usd:8.2f}  {item}" for item, usd in plan.cost_items.items()]
    lines.append(f"\nEstimated provisioning: {est['provision_minutes']:.1f} min along the critical path")
    for step in est["critical_path"]:
        if step["minutes"] >= 0.1:
            lines.append(f"  {step['minutes']:5.1f} min  {step['type']}  {step['urn'].rsplit('::', 1)[-1]}"
                         f"  ({step['source']})")
    lines += render_first_steps(est.get("first_step") or [])
    return "\n".join(lines)


def render_first_steps(rows: list[dict[str, Any]]) -> list[str]:
    from infra.estimate import DURATIONS, IMAGE_PULL_SOURCE

    if not rows:
        return []
    lines = ["\nEstimated time to each experiment's first pod running its image (from the start of pulumi up; "
             "start-up in the pod not included):"]
    for r in rows:
        pull = (f"+ image pull {r['image_pull']:.1f} min ({r['image_mb'] / 1000:.1f} GB unpacked)"
                if r["image_pull"] is not None else "+ image pull unknown (not an image of spec/compat.py's list)")
        lines.append(f"  {r['experiment']}: Job created at {r['job_created']:.1f} min, GPU nodes booted and joined at "
                     f"{r['gpu_nodes_joined']:.1f} min {pull}"
                     + (f" = {r['image_running']:.1f} min" if r["image_running"] is not None else ""))
    lines.append(f"  (node boot and join: {DURATIONS['aws:eks/nodeGroup:NodeGroup'][1]}, the group is ACTIVE once "
                 f"its nodes joined; image pull: {IMAGE_PULL_SOURCE})")
    return lines


def main(args: argparse.Namespace) -> int:
    from spec.fields import ConfigError

    try:
        plan = evaluate(args.stack)
    except ConfigError as e:
        return config_error(args.stack, e.problems)
    if args.json:
        json.dump(plan.as_json(), sys.stdout, indent=1, sort_keys=False)
        print()
    else:
        print(render(plan))
    return 0
