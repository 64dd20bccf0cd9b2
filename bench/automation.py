"""Drive real experiments from Python (notebooks, CI) through the Pulumi Automation API.

    from bench import automation
    automation.plan("dev")                 # offline: what it would build, cost, build time
    rows = automation.run("dev", yes=True, max_cost=150)   # the whole lifecycle: up, wait, collect, destroy
    automation.status("dev")               # stack state and each run's experiment status
    print(automation.logs("dev", "resnet50-synthetic"))
    outputs = automation.up("dev", yes=False)   # the pieces, by hand: up (asks first) ...
    automation.destroy("dev", yes=False)        # ... and destroy (everything but the results bucket)

``run``, ``up`` and ``destroy`` spend money or delete resources, so each takes ``yes`` and has no default: each
shows what it creates or deletes and what that costs an hour, then ``yes=True`` goes on (``eksbench run --yes``)
and ``yes=False`` asks ``Proceed? [y/N]`` on the console (a notebook shows an input box); an answer other than
yes raises AutomationError with nothing done.

Every call validates the stack file first, so a bad config fails here, in one message,
before the CLI is started. The Automation API drives the ``pulumi`` CLI (it must be on
PATH); how bench starts it, gives each stack its own work dir and forwards Ctrl-C to it is
``bench.cloud.pulumi_cli``, which the lifecycle's modules use directly. This module is the API on
top: only the ``eksbench up/preview/destroy/outputs`` commands import it. Concurrent stacks run
in separate processes (``eksbench run a b`` does that): inline programs in threads have open
upstream bugs. The stack is never removed: ``destroy(remove=True)`` would delete
Pulumi.<stack>.yaml, the experiment's definition.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from bench.cloud.backend import CloudBackend
from bench.cloud.pulumi_cli import (
    CLI_MISSING,
    AutomationError,
    cli_failures,
    open_stack,
    outputs,
    stack_outputs,
)
from bench.local.backend import LocalBackend
from bench.project import default_results_root, given_results_root
from core.contract.results_location import RunHandle, parse_handle
from program.stack_files import ROOT, check_stack_name

__all__ = ["AutomationError", "CLI_MISSING", "destroy", "logs", "open_stack", "outputs", "plan", "preview", "run",
           "stack_outputs", "status", "up"]


def overrides(settings: Sequence[str] = (), experiment: str | None = None):
    """``--set KEY=VALUE`` texts and ``--experiment`` as the command line reads them (``core.config.overrides``).
    Raises ValueError (SetError: its one line) for a malformed setting."""
    from core.config.overrides import Overrides
    from program.stack_files import parse_setting

    if isinstance(settings, str) or any(not isinstance(text, str) for text in settings):
        raise TypeError("settings: a list of KEY=VALUE texts, e.g. ['experiments[0].nodes=2']")
    return Overrides(settings=tuple(parse_setting(text) for text in settings), experiment=experiment)


def plan(stack: str, root: Path = ROOT, *, settings: Sequence[str] = (), experiment: str | None = None):
    """The offline plan (no CLI, no AWS): resources, outputs, warnings, cost and build time. ``settings`` and
    ``experiment``: what ``--set`` and ``--experiment`` give ``eksbench plan``."""
    from program.offline import evaluate
    return evaluate(stack, root, overrides=overrides(settings, experiment))


def up(stack: str, root: Path = ROOT, on_output: Callable[[str], Any] | None = print, *,
       yes: bool) -> dict[str, Any]:
    """``pulumi up --refresh`` only (the Jobs start, nothing waits for them); returns the stack outputs.
    ``yes``: go on after showing what it creates (True), or ask first (False)."""
    from bench.cloud.confirm import change_lines
    from program.offline import evaluate

    check_stack_name(stack)
    plan = evaluate(stack, Path(root))  # ConfigError before anything runs
    _confirm("up", stack, change_lines("up", stack, plan), yes=yes, on_output=on_output)
    _node_groups(stack, Path(root), yes=yes, on_output=on_output)
    # refresh: the GPU groups' sizes autostop or --keep set to zero are read back, so the update restores them
    stk = open_stack(stack, root)
    with cli_failures(stack):
        result = stk.up(on_output=on_output, refresh=True)
    return {k: v.value for k, v in result.outputs.items()}


def preview(stack: str, root: Path = ROOT, on_output: Callable[[str], Any] | None = print) -> str:
    stk = open_stack(stack, root)
    with cli_failures(stack):
        return stk.preview(on_output=on_output).stdout


def destroy(stack: str, root: Path = ROOT, on_output: Callable[[str], Any] | None = print, *, yes: bool) -> None:
    """``pulumi destroy``, retried once (clearing a stale lock left by a process that is gone). ``yes``: go on after
    showing what it deletes (True), or ask first (False).

    The results bucket and its objects are retained (retain_on_delete). Never ``remove=True``."""
    from bench.cloud.confirm import change_lines, destroy_plan
    from bench.cloud.stack_operations import destroy_with_retry

    check_stack_name(stack)
    plan, why = destroy_plan(stack, Path(root))
    _confirm("destroy", stack, change_lines("destroy", stack, plan, why_unknown=why), yes=yes, on_output=on_output)

    stk = open_stack(stack, root, check_config=False, create=False)
    with cli_failures(stack):
        ok, left = destroy_with_retry(stk, stack=stack, log=on_output or (lambda _l: None))
    if not ok:
        raise AutomationError(f"destroy of stack {stack} failed; {len(left)} resource(s) left: "
                              + ", ".join(left[:10]) + f"; retry: eksbench destroy {stack}")


def run(stack: str, *, yes: bool, max_cost: float | None = None, keep: bool = False, root: Path = ROOT,
        results_root: str | Path | None = None, deadline_minutes: float | None = None, poll: float = 15.0,
        resume: bool = False, settings: Sequence[str] = (), experiment: str | None = None) -> list[dict[str, Any]]:
    """The whole lifecycle (what ``eksbench run <stack>`` does); returns the results rows. ``yes``: go on after
    showing what it creates and costs (True, as ``--yes``), or ask first (False). ``settings`` and ``experiment``:
    ``--set`` and ``--experiment``.

    Raises AutomationError on a preflight refusal or an answer other than yes (nothing was created), and
    KeyboardInterrupt after the teardown when interrupted. Failed experiments are rows with their status."""
    from bench.cloud.confirm import ask
    from bench.cloud.run import CloudRunOptions, run_stack

    outcome = run_stack(stack, CloudRunOptions(root=Path(root), results_root=_results(root, results_root),
                                               max_cost=max_cost, keep=keep, deadline_minutes=deadline_minutes,
                                               poll=poll, resume=resume, overrides=overrides(settings, experiment),
                                               confirm=lambda lines: ask(lines, yes=yes)))
    if outcome.refusal:
        raise AutomationError(outcome.refusal)
    if outcome.code in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        raise KeyboardInterrupt
    return outcome.rows


def status(stack: str, root: Path = ROOT, results_root: str | Path | None = None, *,
           cloud: bool | None = None) -> dict[str, Any]:
    """Stack state (when the CLI answers) and each run's experiments with their status; ``stack`` may be a run
    handle, ``<stack>[/<run-id>[/<experiment>]]``; ``cloud``: ask Pulumi and S3 (None: where the stack has been
    on AWS)."""
    return stack_status(stack, Path(root), _results(root, results_root), cloud=cloud)


def logs(stack: str, experiment: str | None = None, *, root: Path = ROOT, results_root: str | Path | None = None,
         run_id: str | None = None, tail: int | None = None, node: str | None = None,
         timestamps: bool = False) -> str:
    """The experiment's node logs: from the cluster while it runs, S3 afterwards, or a local run's files
    (``tail``: each node's last lines; ``node``: one node's log, ``node-1`` or ``1``; ``timestamps``: each
    line's UTC time)."""
    return "\n".join(experiment_logs(stack, experiment, root=Path(root), results_root=_results(root, results_root),
                                     run_id=run_id, tail=tail, node=node, timestamps=timestamps))


def _confirm(verb: str, stack: str, lines: list[str], *, yes: bool,
             on_output: Callable[[str], Any] | None) -> None:
    """Show ``lines`` and ask (``bench.cloud.confirm.ask``); AutomationError, nothing done, unless the answer is yes."""
    from bench.cloud.confirm import ask, declined

    quiet = (lambda _l: None) if yes else print  # a question is never asked without what it is about
    if not ask(lines, yes=yes, write=on_output or quiet):
        raise AutomationError(declined(verb, stack))


def _node_groups(stack: str, root: Path, *, yes: bool, on_output: Callable[[str], Any] | None) -> None:
    """``up``'s question when it would roll a node group under the namespace's active Jobs, as ``run``'s preflight
    asks it (``bench.cloud.node_group_updates``): AutomationError, nothing done, unless the answer is yes."""
    from types import SimpleNamespace

    from bench.cloud import node_group_updates
    from bench.cloud.confirm import ask
    from bench.errors import Refusal
    from core.config.overrides import Overrides
    from program.stack_files import load_stack_config

    write = on_output or ((lambda _l: None) if yes else print)
    ready = SimpleNamespace(cfg=load_stack_config(stack, root), overrides=Overrides())
    try:
        write(f"up: {node_group_updates.check(stack, root, ready, lambda lines: ask(lines, yes=yes, write=write))}")
    except Refusal as e:
        raise AutomationError(str(e)) from None


def _results(root: str | Path, results_root: str | Path | None) -> Path:
    """Local results: where asked (``~`` expanded; ValueError for an empty one), else the project's ``results/``,
    as the command line does."""
    if results_root is None:
        return default_results_root(root)
    return given_results_root(results_root, option="results_root")


# --- what each backend knows of a stack (status and logs; ``eksbench status``/``eksbench logs`` print it) ---

def backends(stack: str, root: Path, results_root: Path) -> tuple[Any, CloudBackend, LocalBackend]:
    """The stack's config and its two backends, observing only (no run of their own)."""
    from program.stack_files import load_stack_config

    cfg = load_stack_config(stack, root, cluster=False)  # reads results only
    return (cfg, CloudBackend(stack=stack, cfg=cfg, root=root, results_root=results_root),
            LocalBackend(stack=stack, project=cfg.project, results_root=results_root,
                         repeats={e.name: e.repeats for e in cfg.experiments}))


def run_handle(text: str) -> RunHandle:
    """``<stack>[/<run-id>[/<experiment>]]`` as ``status`` and ``logs`` take it: its stack checked by the stack-name
    rule (ConfigError, as every command says it), the rest by ``parse_handle`` (ValueError)."""
    check_stack_name(str(text).partition("/")[0])
    return parse_handle(text)


def stack_status(stack: str, root: Path, results_root: Path, *, cloud: bool | None = None) -> dict[str, Any]:
    """What each backend knows of a run handle (``<stack>[/<run-id>[/<experiment>]]``): the stack's state and its
    S3 runs (AWS), its local runs. ``runs``: one row per experiment run the handle names, local and S3 together,
    oldest run first (``bench.results.overview``); ``local_runs`` and ``s3_runs``: each place's runs as
    ``{run id: {experiment: status}}``. ``cloud``: ask Pulumi and S3 (None: only where the stack has been on AWS,
    ``bench.cloud.observe.deployed``; else a machine without them would hear of them at every call). ValueError
    for a handle that is not one, or names a run or an experiment that is not there; AutomationError, its line
    naming the fix, where ``cloud`` is True and AWS's credentials cannot serve (none, a profile not there, past
    their time: else that line is a note)."""
    from bench.cloud.observe import deployed
    from bench.results.overview import by_run, handle_rows, merged

    handle = run_handle(stack)
    _, aws_backend, local = backends(handle.stack, root, results_root)
    asked = deployed(handle.stack, root, results_root) if cloud is None else cloud
    aws = aws_backend.status() if asked else {"state": None, "outputs": {}, "rows": [], "notes": [], "autostop": {}}
    if cloud and aws.get("aws_problem"):  # AWS asked by name (--cloud), and its credentials cannot serve
        raise AutomationError(aws["aws_problem"])
    here = local.status()["rows"]
    rows = handle_rows(merged(here, aws["rows"]), handle.stack, handle.run, handle.experiment)
    named = {(r["run"], r["experiment"]) for r in rows}

    def mine(place: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in place if (r["run"], r["experiment"]) in named]

    out: dict[str, Any] = {"stack": handle.stack, "cloud": asked, "state": aws["state"], "outputs": aws["outputs"],
                           "runs": rows, "local_runs": by_run(mine(here)),
                           "s3_runs": by_run(mine(aws["rows"])), "notes": aws["notes"], "autostop": aws["autostop"],
                           "after_autostop_usd": aws.get("after_autostop_usd"),
                           "after_autostop_prices": aws.get("after_autostop_prices")}
    if "where" in aws:
        out["s3_prefix"] = aws["where"]
    return out


def logs_target(handle: RunHandle, experiment: str | None, run_id: str | None) -> tuple[str | None, str | None]:
    """The experiment and run of ``logs``, from the handle or the arguments (each said once: ValueError when
    both say it differently); the experiment None when neither names one."""
    for what, named, given in (("experiment", handle.experiment, experiment), ("run", handle.run, run_id)):
        if named and given and named != given:
            raise ValueError(f"{handle} names {what} {named!r} and the command line {what} {given!r}: give it once")
    return handle.experiment or experiment, handle.run or run_id


def experiment_logs(stack: str, experiment: str | None = None, *, root: Path, results_root: Path,
                    run_id: str | None = None, follow: bool = False, tail: int | None = None, node: str | None = None,
                    timestamps: bool = False) -> Iterator[str]:
    """Lines of the experiment's logs from the first backend that has them: the cluster or S3, else local files.
    ``stack`` may be a run handle (``<stack>[/<run-id>[/<experiment>]]``) that names the run and the experiment.
    ``tail``: each node's last ``tail`` lines (with ``follow``, then what comes); ``node``: one node's log
    (``node-1`` or ``1``); ``timestamps``: each line after its node with the UTC time it was written.
    ValueError for a run id that cannot be one (``check_run_id``), an experiment the stack or the run does not
    have (naming those it has), or a node with no log (naming the nodes there)."""
    from core.contract.results_location import check_run_id, quoted

    handle = run_handle(stack)
    experiment, run_id = logs_target(handle, experiment, run_id)
    stack = handle.stack
    if run_id is not None:
        check_run_id(run_id)
    cfg, cloud, local = backends(stack, root, results_root)
    names = [e.name for e in cfg.experiments]
    if experiment is None:
        raise ValueError(f"which experiment of {handle}? name one ({', '.join(names)}), e.g. eksbench logs "
                         f"{stack} {names[0] if names else '<experiment>'}")
    if experiment not in names:
        raise ValueError(f"no experiment {quoted(experiment)} in stack {stack}; experiments: {', '.join(names)}")
    looked = []
    for backend in (cloud, local):
        try:
            return backend.logs(experiment, run_id=run_id, follow=follow, tail=tail, node=node,
                                timestamps=timestamps)
        except FileNotFoundError as e:
            looked.append(str(e))
    raise FileNotFoundError(f"no logs for {RunHandle(stack, run_id, experiment)}: " + ", ".join(looked))
