"""Drive real experiments from Python (notebooks, CI) through the Pulumi Automation API.

    from bench import automation
    automation.plan("dev")                 # offline: what it would build, cost, build time
    outputs = automation.up("dev")         # real: needs the Pulumi CLI and AWS credentials
    outputs["experiment_results"]          # s3:// URI of each experiment's results
    automation.destroy("dev")              # everything but the results bucket

Every call validates the stack file first, so a bad config fails here, in one message,
before the CLI is started. The Automation API drives the ``pulumi`` CLI (it must be on
PATH). Run concurrent stacks from separate processes, one stack each: inline programs
in threads have open upstream bugs (pulumi/pulumi issues on concurrent inline programs).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from bench.stack_files import ROOT, load_stack_config

CLI_MISSING = ("the Pulumi CLI is not on PATH: install it (https://www.pulumi.com/docs/install/), "
               "log in (`pulumi login` or PULUMI_BACKEND_URL=file://...), then retry; "
               "`python -m bench plan <stack>` works without it")


class AutomationError(RuntimeError):
    """A real-cloud operation could not start; the message says why and what to do."""


def plan(stack: str, root: Path = ROOT):
    """The offline plan (no CLI, no AWS): resources, outputs, warnings, cost and build time."""
    from bench.plan import evaluate
    return evaluate(stack, root)


def _stack(stack: str, root: Path):
    load_stack_config(stack, root)  # raises ConfigError before anything runs
    if shutil.which("pulumi") is None:
        raise AutomationError(CLI_MISSING)
    from pulumi import automation as auto
    return auto.create_or_select_stack(stack_name=stack, work_dir=str(root))


def up(stack: str, root: Path = ROOT, on_output: Callable[[str], Any] | None = print) -> dict[str, Any]:
    """``pulumi up``; returns the stack outputs as plain values."""
    result = _stack(stack, root).up(on_output=on_output)
    return {k: v.value for k, v in result.outputs.items()}


def preview(stack: str, root: Path = ROOT, on_output: Callable[[str], Any] | None = print) -> str:
    return _stack(stack, root).preview(on_output=on_output).stdout


def outputs(stack: str, root: Path = ROOT) -> dict[str, Any]:
    return {k: v.value for k, v in _stack(stack, root).outputs().items()}


def destroy(stack: str, root: Path = ROOT, on_output: Callable[[str], Any] | None = print) -> None:
    """``pulumi destroy``: the results bucket and its objects are retained (retain_on_delete)."""
    _stack(stack, root).destroy(on_output=on_output)
