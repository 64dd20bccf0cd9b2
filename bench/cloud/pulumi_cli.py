"""The Pulumi CLI as bench drives it: the CLI child process, work dirs, and opening stacks.

The lower layers of ``bench`` (the cloud backend, destroy with its retry, preflight, ``bench
status``/``bench logs``) and the notebook API ``bench.automation`` on top of them all start the
CLI through this module, so it imports nothing of theirs.

The CLI is started in its own session (``isolate_cli``): a terminal's Ctrl-C then reaches
``bench`` only, which forwards exactly one SIGINT to the CLI (``forward_sigint``; the CLI's second
SIGINT means "terminate now", which leaves the stack locked) and waits for it to finish its
in-flight operations. Each stack gets its own work dir (``.eksbench/work/<stack>/``: links to the
project's files): Pulumi's per-directory workspace state is not shared between concurrent runs.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess as _subprocess
import threading
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from core.config.overrides import Overrides
from core.contract.names import ENV_OVERRIDES, LOCAL_RESULTS_ROOT
from program.stack_files import ROOT, check_stack_name, load_stack_config, stack_file

CLI_MISSING = ("the Pulumi CLI is not on PATH: install it (https://www.pulumi.com/docs/install/), "
               "log in (`pulumi login` or PULUMI_BACKEND_URL=file://... with PULUMI_CONFIG_PASSPHRASE), then retry; "
               "`eksbench plan <stack>` and `eksbench run <stack> --local` work without it")
WORK_DIR = ".eksbench/work"
# The Pulumi CLI's failures a new user meets first, in the CLI's own words (github.com/pulumi/pulumi, alike at
# v3.259.0 and on master in 2026): pkg/backend/backenderr/backenderr.go, MissingEnvVarForNonInteractiveError
# ("PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions": never logged in, no
# PULUMI_BACKEND_URL) and LoginRequiredError ("this command requires logging in; try running `pulumi login` first",
# or "SAML SSO authentication is required": a login that has lapsed); pkg/secrets/passphrase/manager.go ("passphrase
# must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables": a stack of a
# self-managed backend without its passphrase). Each is one line naming the fix (``cli_problem``).
LOGIN_HOWTO = ("run `pulumi login` (Pulumi Cloud; or set PULUMI_ACCESS_TOKEN), or `pulumi login --local` (state in "
               "~/.pulumi; then also set PULUMI_CONFIG_PASSPHRASE), then retry")
FIRST_FAILURES = (
    ("must be set for login during non-interactive CLI sessions",
     "the Pulumi CLI is not logged in to a backend: " + LOGIN_HOWTO),
    ("this command requires logging in", "the Pulumi CLI's login has lapsed: " + LOGIN_HOWTO),
    ("SAML SSO authentication is required", "the Pulumi CLI's login has lapsed: " + LOGIN_HOWTO),
    ("passphrase must be set with PULUMI_CONFIG_PASSPHRASE",
     "the stack's secrets need their passphrase: set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) to "
     "the one the stack was made with, then retry"),
    ("incorrect passphrase",  # passphrase/manager.go: "failed to decrypt: incorrect passphrase, please set ..."
     "the stack's secrets do not open with this passphrase: set PULUMI_CONFIG_PASSPHRASE (or "
     "PULUMI_CONFIG_PASSPHRASE_FILE) to the one the stack was made with, then retry"),
)
# backenderr.go's StackNotFoundError: "no stack named '<stack>' found" (a stack selected, never created).
NO_STACK = re.compile(r"no stack named '[^'\n]*' found")


class AutomationError(RuntimeError):
    """A real-cloud operation could not start or finish; the message says why and what to do."""


def cli_problem(error: BaseException, stack: str) -> str | None:
    """The one line naming the fix for a failure of the Pulumi CLI that a new user meets first (``FIRST_FAILURES``,
    and a stack the backend does not have), read from the CLI's output that ``error`` (``CommandError``) carries;
    None for any other failure."""
    text = str(error)
    for words, line in FIRST_FAILURES:
        if words in text:
            return line
    if NO_STACK.search(text):
        return (f"the Pulumi backend the CLI is logged in to has no stack {stack} (`pulumi whoami --verbose` names "
                f"that backend): `eksbench up {stack}` builds it, or log in to the backend that has it")
    return None


@contextmanager
def cli_failures(stack: str) -> Iterator[None]:
    """The Pulumi CLI's first failures (``cli_problem``), met inside, raised as AutomationError with their one line;
    any other failure as it came."""
    from pulumi.automation import errors

    try:
        yield
    except errors.CommandError as e:
        if line := cli_problem(e, stack):
            raise AutomationError(line) from None
        raise


# --- the CLI child: own session, parent-death signal, tracked for signal forwarding ------------------

_children: "weakref.WeakSet[_subprocess.Popen]" = weakref.WeakSet()
_forwarded: set[int] = set()
_isolate_lock = threading.Lock()


class _SubprocessShim:
    """Stands in for the ``subprocess`` module inside ``pulumi.automation._cmd``: same API, but every
    ``Popen`` (the CLI) starts in its own session, gets SIGINT if bench dies, and is tracked."""

    def __init__(self, real: Any):
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def Popen(self, *args: Any, **kwargs: Any) -> _subprocess.Popen:  # noqa: N802 - mirrors subprocess
        from bench.proc import die_with_parent

        kwargs.setdefault("start_new_session", True)
        pre = die_with_parent(signal.SIGINT)
        if pre is not None and "preexec_fn" not in kwargs:
            kwargs["preexec_fn"] = pre
        proc = self._real.Popen(*args, **kwargs)
        _children.add(proc)
        return proc


def isolate_cli() -> None:
    """Install the shim (idempotent). Checked against pulumi 3.272: ``PulumiCommand.run`` calls
    ``subprocess.Popen`` from ``pulumi/automation/_cmd.py``."""
    from pulumi.automation import _cmd

    with _isolate_lock:
        if not isinstance(_cmd.subprocess, _SubprocessShim):
            _cmd.subprocess = _SubprocessShim(_cmd.subprocess)


def running_cli() -> list[_subprocess.Popen]:
    return [p for p in list(_children) if p.poll() is None]


def forward_sigint() -> int:
    """SIGINT, once, to each running CLI child (it then cancels gracefully); returns how many got it."""
    n = 0
    for p in running_cli():
        if p.pid in _forwarded:
            continue
        _forwarded.add(p.pid)
        try:
            p.send_signal(signal.SIGINT)
            n += 1
        except ProcessLookupError:
            pass
    return n


# --- work dirs and stacks ---------------------------------------------------------------------------

def work_dir(stack: str, root: Path = ROOT) -> Path:
    """``<root>/.eksbench/work/<stack>/``: links to the project's files, so each stack has its own
    work dir (Pulumi's per-directory workspace state is not shared between concurrent runs) while
    the program and Pulumi.<stack>.yaml stay the user's own files."""
    root = Path(root).resolve()
    base = root / WORK_DIR
    wd = base / check_stack_name(stack)
    wd.mkdir(parents=True, exist_ok=True)
    # Everything below is deleted and relinked: it must be this stack's own folder, not a link planted to
    # point elsewhere (a deletion never leaves the folder it owns).
    if wd.is_symlink() or wd.resolve().parent != base.resolve():
        raise AutomationError(f"{wd} is not a folder of {base} (a link?); remove it and retry")
    for entry in root.iterdir():
        if entry.name.startswith(".") or entry.name == LOCAL_RESULTS_ROOT or (
                entry.name.startswith("Pulumi.") and entry.name not in ("Pulumi.yaml", f"Pulumi.{stack}.yaml")):
            continue
        link = wd / entry.name
        if link.is_symlink() and os.readlink(link) == str(entry):
            continue
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.exists():
            shutil.rmtree(link)
        link.symlink_to(entry)
    return wd


def sync_stack_file(stack: str, root: Path = ROOT) -> None:
    """If the CLI replaced the linked Pulumi.<stack>.yaml by a file (an atomic rewrite, e.g. adding
    ``encryptionsalt``), copy it back over the user's file and link it again."""
    wd = Path(root).resolve() / WORK_DIR / check_stack_name(stack)
    linked = wd / f"Pulumi.{stack}.yaml"
    if linked.is_file() and not linked.is_symlink():
        target = stack_file(stack, Path(root).resolve())
        shutil.copyfile(linked, target)
        linked.unlink()
        linked.symlink_to(target)


def open_stack(stack: str, root: Path = ROOT, *, check_config: bool = True, create: bool = True,
               overrides: Overrides = Overrides()):
    """``create_or_select_stack`` in the stack's own work dir (``stack select``, else ``stack init``);
    ``create=False``: select only (status, logs, destroy must not create a stack). ``overrides`` (``--set``,
    ``--experiment``) go to every CLI command of the stack in ``ENV_OVERRIDES``, which the CLI passes on to the
    program it runs (``__main__.py``); the stack file stays as the user wrote it."""
    check_stack_name(stack)  # always, config checked or not: the name becomes folder names
    if check_config:
        load_stack_config(stack, root, overrides=overrides)  # raises ConfigError before anything runs
    if shutil.which("pulumi") is None:
        raise AutomationError(CLI_MISSING)
    from pulumi import automation as auto

    isolate_cli()
    opener = auto.create_or_select_stack if create else auto.select_stack
    env = {ENV_OVERRIDES: overrides.to_env()} if overrides else None
    with cli_failures(stack):
        stk = opener(stack_name=stack, work_dir=str(work_dir(stack, root)),
                     opts=auto.LocalWorkspaceOptions(env_vars=env))
    sync_stack_file(stack, root)
    return stk


def outputs(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The outputs of one of this project's stacks (its config checked; select only)."""
    stk = open_stack(stack, root, create=False)
    with cli_failures(stack):
        return {k: v.value for k, v in stk.outputs().items()}


def stack_outputs(name: str, root: Path = ROOT) -> dict[str, Any]:
    """The outputs of any stack by name, fully qualified (<organization>/<project>/<stack>) or not: how
    bench reads the home stack an experiment stack names in results.home_stack. Select only."""
    if shutil.which("pulumi") is None:
        raise AutomationError(CLI_MISSING)
    from pulumi import automation as auto

    isolate_cli()
    with cli_failures(name):
        stk = auto.select_stack(stack_name=name,
                                work_dir=str(work_dir(check_stack_name(name.rsplit("/", 1)[-1]), root)))
        return {k: v.value for k, v in stk.outputs().items()}
