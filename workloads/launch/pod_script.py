"""The training container's ``sh -c`` script (pure: it returns text): package installs, the
framework's prelude, then the results launcher (``workloads.train.harness.launch``) around the command.

Tests run it with ``sh``, as PID 1 of a PID namespace where they can, with a slow or failing
stand-in for ``pip`` (tests/workloads/test_pod_script.py).
"""

from __future__ import annotations

import shlex
from typing import Mapping

from core.catalog.pins import PIP_PINS
from core.contract.launch_command import Launched, launcher_argv


def ensure_modules(modules: tuple[str, ...], pins: Mapping[str, str] = PIP_PINS) -> str:
    """Shell lines that install the pinned package of each module the image cannot import, and
    only those: the DLC has boto3 but not python-etcd, and a second boto3 in ~/.local would
    shadow the image's. One interpreter start checks them all in the common case. Each install
    is a ``step`` of ``launcher_script`` (which defines it): run in the background so a SIGTERM
    is handled at once, and the pod stops with a summary when it fails. ``pins``: module -> pinned requirement."""
    if not modules:
        return ""
    each = [f'  python3 -c "import {m}" 2>/dev/null || '
            f'step {shlex.quote("installing " + pins[m])} env PIP_BREAK_SYSTEM_PACKAGES=1 '
            f"python3 -m pip install --no-cache-dir --quiet {pins[m]}" for m in modules]
    return "\n".join([f'python3 -c "import {", ".join(modules)}" 2>/dev/null || {{', *each, "}"])


def launcher_script(argv: tuple[str, ...], *, results_dir: str, results_uri: str, experiment: str,
                    prelude: str = "", modules: tuple[str, ...] = ("boto3",), launched: Launched = Launched(),
                    stop_with: str | None = None, pins: Mapping[str, str] = PIP_PINS) -> str:
    """The container's ``sh -c`` script: deps, prelude, then the results launcher around ``argv``.

    ``sh`` is PID 1 of the container, and the kernel delivers to PID 1 only the signals it has a
    handler for (signal(7)/pid_namespaces(7): the init of a PID namespace), so the TERM trap is
    set before anything else: a SIGTERM that arrives during a package install stops the install
    at once (a trap waits for a foreground command, so each set-up step runs in the background)
    and the launcher still writes and uploads a failed summary (``--setup-failed``). A failed
    install stops the pod the same way instead of carrying on into the command (no ``set -e``:
    it would also end the script when ``wait`` returns for a trapped signal). The launcher runs
    as a child so that SIGTERM (activeDeadlineSeconds, eviction, a met success policy) reaches
    it through the trap and it can still write summary.json and upload.
    """
    head = launcher_argv(python="python3", results_dir=results_dir, results_uri=results_uri, experiment=experiment,
                         stop_with=stop_with, launched=launched)
    tail = ["--", *argv]
    give_up = " ".join(shlex.quote(a) for a in head) + ' --setup-failed "$1" --setup-error "$2" ' + \
        " ".join(shlex.quote(a) for a in tail)
    lines = ["set -u",
             "child= stopped=",
             "trap 'kill -TERM $child 2>/dev/null; stopped=143' TERM",
             "trap 'kill -INT $child 2>/dev/null; stopped=130' INT",
             # give_up CODE WHY: a failed summary for a pod that never ran its command, then exit CODE
             "give_up() {", f"  {give_up}", '  exit "$1"', "}",
             # step WHAT CMD...: CMD in the background (signals are handled at once), give up when it fails
             "step() {", '  what=$1; shift', '  "$@" &', "  child=$!",
             "  wait $child; rc=$?",
             "  while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done",
             "  child=",
             '  [ -z "$stopped" ] || give_up "$stopped" "stopped by a signal while $what"',
             '  [ "$rc" -eq 0 ] || give_up "$rc" "$what failed with exit code $rc"', "}",
             f"mkdir -p {shlex.quote(results_dir)}", ensure_modules(modules, pins), prelude,
             '[ -z "$stopped" ] || give_up "$stopped" "stopped by a signal before the command started"',
             " ".join(shlex.quote(a) for a in head + tail) + " &",
             "child=$!",
             "wait $child; rc=$?",
             # a signal ends `wait` early (status > 128): wait again until the launcher has exited
             "while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done",
             "exit $rc"]
    return "\n".join(line for line in lines if line) + "\n"
