"""Before a command spends money or deletes resources: what it will do, what that costs an hour, then the question.

``eksbench run <stack>`` (on AWS), ``up`` and ``destroy`` show the offline plan's resources and hourly cost (the
plan's estimate, ``program.offline.evaluate``: the figures ``eksbench plan`` prints) and ask ``Proceed? [y/N]``, as
``pulumi up`` and ``pulumi destroy`` ask before they act. ``--yes`` (the API's ``yes=True``) answers for the
user; without a terminal and without ``--yes`` the command refuses, as Pulumi does in non-interactive mode
("--yes must be passed in to proceed when running in non-interactive mode"). Anything but y or yes, end of input
included, is no: nothing is done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

PROMPT = "Proceed? [y/N] "
YES = frozenset({"y", "yes"})
# What each verb does with the stack's resources, said before the figures.
DOES = {"run": "creates {n}, runs the experiments, then destroys what it created",
        "up": "creates {n} and starts the experiments' Jobs, up until `eksbench destroy {stack}`",
        "destroy": "deletes the stack's resources, {n} as Pulumi.{stack}.yaml plans them"}
KEPT_SHOWN = 4


def terminal_problem(command: str, *, yes: bool, interactive: bool) -> str | None:
    """The one line that refuses ``command`` (``run dev``) when nobody can answer its question; None otherwise."""
    if yes or interactive:
        return None
    return (f"eksbench {command} asks before it creates or deletes resources on AWS, and stdin is not a terminal: "
            "pass --yes to proceed without the question (`eksbench plan STACK` shows what a stack creates and costs)")


def declined(verb: str, stack: str) -> str:
    """The line after an answer other than yes."""
    return f"eksbench {verb} {stack} not confirmed: nothing was done (--yes proceeds without the question)"


def resource_count(resources: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """How many cloud resources a plan registers (eksbench's own components aside) and the names of those a
    destroy keeps (``retain_on_delete``: the results bucket, the image repository)."""
    custom = [r for r in resources if not r["type"].startswith("eksbench:")]
    return len(custom), [r["name"] for r in custom if r.get("retain_on_delete")]


def change_lines(verb: str, stack: str, plan: Any | None, *, why_unknown: str = "") -> list[str]:
    """What ``verb`` (run, up, destroy) does to ``stack`` and what its resources cost an hour, from the offline
    ``plan`` (``program.offline.Plan``); ``plan`` None: not known offline, ``why_unknown`` says why."""
    if plan is None:
        return [f"eksbench {verb} {stack}: what the stack holds is not known offline ({why_unknown}); "
                f"{verb} acts on whatever the stack holds"]
    count, kept = resource_count(plan.resources)
    region = plan.outputs.get("region", "its region")
    lines = [f"eksbench {verb} {stack} " + DOES[verb].format(n=f"{count} resources in {region}", stack=stack)
             + f" (`eksbench plan {stack}` lists them); billed while up:"]
    if kept:
        extra = f" and {len(kept) - KEPT_SHOWN} more" if len(kept) > KEPT_SHOWN else ""
        lines.append(f"  kept by a destroy (retain_on_delete): {', '.join(kept[:KEPT_SHOWN])}{extra}")
    lines += [f"  {_usd(usd)}/h  {item}" for item, usd in plan.cost_items.items()]
    est = plan.estimate
    if est.get("hourly_cost_usd") is None:
        lines.append(f"  cost per hour unknown: {'; '.join(est.get('unpriced') or [])}")
    else:
        prices = (est.get("prices") or {}).get("instances")
        lines.append(f"  ${est['hourly_cost_usd']:.2f}/hour on demand while up"
                     + (f" (instances at {prices})" if prices else ""))
    return lines


def _usd(usd: float | None) -> str:
    return f"{f'${usd:.2f}':>9}" if usd is not None else " no price"


def ask(lines: list[str], *, yes: bool, read: Callable[[str], str] | None = None,
        write: Callable[[str], Any] = print) -> bool:
    """Show ``lines``, then the question (answered by ``yes``, else read): True to go ahead. ``read`` None: the
    ``input`` of the moment, looked up at the call (a Jupyter kernel puts its own in builtins per cell)."""
    import builtins

    for line in lines:
        write(line)
    if yes:
        write(f"{PROMPT}yes (--yes)")
        return True
    try:
        answer = (read or builtins.input)(PROMPT)
    except (EOFError, NotImplementedError):  # end of input, or a notebook frontend without stdin: no
        answer = ""
    return answer.strip().lower() in YES


def destroy_plan(stack: str, root: Path) -> tuple[Any | None, str]:
    """The offline plan of what ``destroy`` deletes, or None and why when the stack file does not evaluate (a
    stack whose file was broken since it was built can still be destroyed)."""
    from core.config.fields import ConfigError
    from program.offline import evaluate

    try:
        return evaluate(stack, root), ""
    except ConfigError as e:
        return None, f"Pulumi.{stack}.yaml does not validate: {'; '.join(e.problems)}"
    except OSError as e:
        return None, f"Pulumi.{stack}.yaml cannot be read: {e.strerror or e}"
