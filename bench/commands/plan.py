"""``python -m bench plan <stack>``: what ``pulumi up -s <stack>`` would build, offline, printed.

The evaluation itself (the program under Pulumi's mock engine, its registrations, outputs, warnings and
estimates) is ``program.offline.evaluate``; this module is its command line: the table of resources, the
outputs, the warnings, the cost per hour and the critical path, or the same as one JSON document.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench.commands.settings import add_set_option, overrides_of
from bench.errors import config_error, fail
from bench.project import add_project_options
from core.contract import strict_json
from program.offline import Plan, evaluate


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan", help="what `pulumi up` would build, its cost per hour and build time (offline)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Evaluate the stack's program offline, under Pulumi's mock engine: nothing is created and no AWS\n"
                    "account is needed. Prints the resources, the stack outputs, warnings, the on-demand cost per\n"
                    "hour, the provisioning time along the critical path and when each experiment's first pod runs.",
        epilog="examples:\n  eksbench plan dev\n  eksbench plan p5-fsx --json | jq .estimate.hourly_cost_usd\n"
               "  eksbench plan dev --experiment resnet50-synthetic --set 'experiments[0].nodes=1'")
    p.add_argument("stack", help="stack name (reads Pulumi.<stack>.yaml)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document; its Kubernetes objects are as the API gets them, so a $ that a "
                        "container receives shows as $$ in its command, args and env values")
    p.add_argument("--experiment", metavar="NAME", help="plan only this experiment's Jobs, as eksbench run "
                                                         "--experiment NAME builds them")
    add_set_option(p)
    add_project_options(p, results=False)
    p.set_defaults(func=main)


def render(plan: Plan) -> str:
    lines = [f"eksbench plan for stack {plan.stack!r}: evaluated __main__.py under Pulumi's mock engine "
             f"in {plan.seconds:.1f} s; nothing was created."]
    custom = [r for r in plan.resources if not r["type"].startswith("eksbench:")]
    lines.append(f"\nResources ({len(custom)}, plus {len(plan.resources) - len(custom)} eksbench components):")
    for typ, n in sorted(Counter(r["type"] for r in custom).items()):
        lines.append(f"  {n:3d}  {typ}")
    lines += render_outputs(plan.outputs, plan.placeholders)
    if plan.warnings:
        lines.append("\nWarnings:")
        lines += [f"  ! {w}" for w in plan.warnings]
    est = plan.estimate
    lines += render_cost(est, plan.cost_items)
    lines += render_sweep_idle(est.get("sweep_idle") or [])
    lines.append(f"\nEstimated provisioning: {est['provision_minutes']:.1f} min along the critical path")
    for step in est["critical_path"]:
        if step["minutes"] >= 0.1:
            lines.append(f"  {step['minutes']:5.1f} min  {step['type']}  {step['urn'].rsplit('::', 1)[-1]}"
                         f"  ({step['source']})")
    lines += render_first_steps(est.get("first_step") or [])
    lines += render_lr_schedules(est.get("lr_schedules") or [])
    lines += render_gpu_defaults(est.get("gpu_defaults") or [])
    lines += render_language_models(est.get("language_models") or [])
    return "\n".join(lines)


PLACEHOLDER = "(offline placeholder)"


def render_outputs(outputs: dict[str, Any], placeholders: list[str]) -> list[str]:
    """The stack outputs, each value the mock engine made up labelled PLACEHOLDER (``Plan.placeholders``)."""
    lines = ["\nOutputs:"]
    if placeholders:
        lines.append(f"  (a value marked {PLACEHOLDER} is made up by the mock engine; `pulumi up` exports the real "
                     "one there)")
    width = max(map(len, outputs), default=0)
    for key, value in outputs.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        lines.append(f"  {key:<{width}}  {shown}" + (f"  {PLACEHOLDER}" if key in placeholders else ""))
    return lines


def render_cost(est: dict[str, Any], items: dict[str, float | None]) -> list[str]:
    """The hourly cost, each price's region, source and date, and by name every instance type with no price in the
    stack's region (its item says so; the total is then unknown, never made up from another region's price)."""
    hourly = est.get("hourly_cost_usd")
    if hourly is None:
        known = sum(v for v in items.values() if v is not None)
        head = f"\nEstimated cost: unknown (${known:.2f}/hour without the instances that have no price):"
        lines = [head] + [f"  ! {why}" for why in est.get("unpriced") or []]
        lines.append("  (`eksbench prices refresh` fetches AWS's prices of today, with AWS credentials)")
    else:
        lines = [f"\nEstimated cost: ${hourly:.2f}/hour on demand (approximate; not a bill)"]
    lines += render_storage_prices(est.get("storage_prices"))
    prices = est.get("prices") or {}
    if prices:
        lines += [f"  instances at {prices['instances']}",
                  f"  control plane, NAT gateways and FSx at {prices['other']}"]
    lines += [f"  ${usd:8.2f}  {item}" if usd is not None else f"  no price   {item}" for item, usd in items.items()]
    return lines


def render_storage_prices(storage: dict[str, Any] | None) -> list[str]:
    """A home stack's costs by use: S3 storage per GB-month and requests per 1,000 in its region, with their source;
    nothing made up where the catalog has no price there (``program.offline.storage_prices``)."""
    if not storage:
        return []
    head = f"  nothing bills by the hour; the bucket bills by use, at {storage['region']} prices"
    ecr = "  (and the image repository, ECR, per GB-month stored: not in eksbench's catalog)"
    if storage["s3_usd_per_gb_month"] is None:
        return [f"{head}: {storage['source']}", ecr]
    return [f"{head} ({storage['source']}):",
            f"    ${storage['s3_usd_per_gb_month']:g} per GB-month stored (S3 Standard, first 50 TB)",
            f"    ${storage['s3_usd_per_1000_put_copy_post_list']:g} per 1,000 PUT, COPY, POST or LIST requests",
            f"    ${storage['s3_usd_per_1000_get_and_other']:g} per 1,000 GET and other requests", ecr]


def render_sweep_idle(rows: list[dict[str, Any]]) -> list[str]:
    """Per GPU group: node-hours its runs bill one after another, and the share left idle (estimate.sweep_idle)."""
    if not rows:
        return []
    lines = ["\nGPU node-hours of the runs one after another, at one hour a run (each group stays at its size; "
             "dollars at the instance prices above):"]
    for r in rows:
        usd = (f"${r['idle_usd']:,.2f} of ${r['billed_usd']:,.2f}" if r["billed_usd"] is not None
               else f"no price for {r['instance_type']} in this region")
        lines.append(f"  {r['group']} ({r['nodes']}x {r['instance_type']}): {r['runs']} runs bill "
                     f"{r['billed_node_hours']} node-hours and use {r['used_node_hours']}: {r['idle_share']:.0%} idle "
                     f"({usd})")
    return lines


def render_gpu_defaults(rows: list[dict[str, Any]]) -> list[str]:
    """Per experiment: compiled or eager, and its input path, each with the reason (program.offline.gpu_defaults)."""
    if not rows:
        return []
    lines = ["\nOn its GPUs, each experiment (compile: true/false in the stack file overrides the rule):"]
    for r in rows:
        lines.append(f"  {r['experiment']}: {'compiled' if r['compile'] else 'eager'}: {r['compile_reason']}")
        lines.append(f"  {' ' * len(r['experiment'])}  input: {r['input_path_label']}: {r['input_reason']}")
        lines += [f"  {' ' * len(r['experiment'])}  note: {note}" for note in r.get("notes") or []]
    return lines


def render_language_models(rows: list[dict[str, Any]]) -> list[str]:
    """Per language-model experiment: its model's size and FLOPs, one GPU's memory estimate against the GPU's, and
    tokens/s per GPU and the cost of a billion tokens from the nearest published figure of that GPU, named
    (program.language_model_estimate)."""
    if not rows:
        return []
    lines = ["\nLanguage models (memory: an estimate, core/catalog/llm_memory.py; tokens/s: a published figure of the "
             "same GPU, core/catalog/llm_anchors.py, not a measurement of this stack):"]
    for r in rows:
        pad = " " * (len(r["experiment"]) + 2)
        lines.append(f"  {r['experiment']}: Llama 3 {r['model_size'].upper()}, {r['parameters']:,} parameters, "
                     f"{r['flops_per_token'] / 1e9:,.2f} GFLOP per token at seq {r['seq_len']:,}, {r['precision']} "
                     f"on {r['nodes']} x {r['instance_type']} ({r['gpus']} {r['gpu_model']})")
        fits = {True: "fits", False: "DOES NOT FIT", None: "GPU memory unknown"}[r["memory_fits"]]
        lines.append(f"  {pad}memory per GPU: {r['memory_text']}: {fits}")
        rate, usd = r["tokens_per_s_per_gpu_estimate"], r["usd_per_billion_tokens_estimate"]
        if rate is None:
            lines.append(f"  {pad}tokens/s: {r['estimate_note']}")
            continue
        cost = f", ~${usd:,.0f} per billion tokens at {r['region']} on-demand prices" if usd is not None else ""
        lines.append(f"  {pad}~{rate:,.0f} tokens/s/GPU{cost} ({r['estimate_note']})")
    return lines


def render_lr_schedules(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = ["\nLearning rate at full size (the workload's rule: linear scaling for an image workload, a fixed rate for a "
             "language model; warm-up where the global batch or the workload calls for it):"]
    for r in rows:
        lines.append(f"  {r['experiment']}: global batch {r['global_batch']}, "
                     + (r["warmup"] or f"lr {r['lr']:g}, no warm-up (global batch <= 1024)"))
    return lines


def render_first_steps(rows: list[dict[str, Any]]) -> list[str]:
    from infra.cluster.estimate import DURATIONS, IMAGE_PULL_SOURCE

    if not rows:
        return []
    lines = ["\nEstimated time to each experiment's first pod running its image (from the start of pulumi up; "
             "start-up in the pod not included):"]
    for r in rows:
        pull = (f"+ image pull {r['image_pull']:.1f} min ({r['image_mb'] / 1000:.1f} GB unpacked)"
                if r["image_pull"] is not None else "+ image pull unknown (not an image of core/catalog/compat.py's list)")
        if r.get("after"):
            first = f"after {r['not_before']:.1f} min" if r.get("not_before") is not None else "later"
            last = (f", by {r['latest_running']:.1f} min at the latest" if r["latest_running"] is not None else "")
            lines.append(f"  {r['experiment']}: starts when {r['after']} ends: {first}{last} (the runs before it may "
                         f"take up to {r['waits_at_most']} min: their timeouts, evaluation and start-up)")
            continue
        lines.append(f"  {r['experiment']}: Job created at {r['job_created']:.1f} min, GPU nodes booted and joined at "
                     f"{r['gpu_nodes_joined']:.1f} min {pull}"
                     + (f" = {r['image_running']:.1f} min" if r["image_running"] is not None else ""))
    lines.append(f"  (node boot and join: {DURATIONS['aws:eks/nodeGroup:NodeGroup'][1]}, the group is ACTIVE once "
                 f"its nodes joined; image pull: {IMAGE_PULL_SOURCE})")
    return lines


def main(args: argparse.Namespace) -> int:
    from core.config.fields import ConfigError
    from core.config.overrides import SetError

    try:
        plan = evaluate(args.stack, Path(args.project_dir), overrides=overrides_of(args, args.experiment))
    except SetError as e:
        return fail(str(e))
    except ConfigError as e:
        return config_error(args.stack, e.problems)
    if args.json:
        sys.stdout.write(strict_json.dumps(plan.as_json(), indent=1, sort_keys=False))
        print()
    else:
        print(render(plan))
    return 0
