"""The README's commands, read from its code blocks: what `tests/test_readme.py` runs in the test environment and
what `.ci/front-door` runs as a new user would, in a fresh venv built from the install files alone.

Standard library only: the front door runs this before anything is installed
(``python3 tests/support/readme_steps.py README.md`` prints the shell script of its steps).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

COMMAND_1 = "bash .ci/setup && "  # how README command 1 starts: set-up, then the venv, then the run
# `eksbench` subcommands that need neither AWS nor the Pulumi CLI (`run` only with --local).
OFFLINE = {"plan", "status", "logs", "report", "compare"}
# The README opens the notebook in JupyterLab (a server a person uses); the front door executes it instead.
JUPYTER_LAB = re.compile(r"^jupyter lab (\S+\.ipynb)$")


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def lines(text: str) -> list[str]:
    """Every command line of the README's bash blocks, in order, each without its comment."""
    return [line.split("  #")[0].strip() for block in blocks(text, "bash") for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def command_1(text: str) -> str:
    """README command 1, exactly as written."""
    (first,) = [line for line in lines(text) if line.startswith(COMMAND_1)]
    return first


def commands(text: str) -> list[str]:
    """Each ``eksbench ...`` of the README's bash blocks (command 1's set-up and activation dropped), in order."""
    found = []
    for line in lines(text):
        if line.startswith(COMMAND_1):
            line = line.rsplit(" && ", 1)[-1]
        if line.startswith("eksbench "):
            found.append(line)
    return found


def offline(argv: list[str]) -> bool:
    return argv[0] in OFFLINE or (argv[0] == "run" and "--local" in argv)


def front_door_steps(text: str, scratch: str) -> list[str]:
    """What a new user types, in the README's order, that needs no AWS account: command 1, then each offline
    ``eksbench`` command, each ``pip install`` the README names (its extras), the notebook (executed into
    ``scratch`` rather than opened), and the README's Python that needs no AWS (run with the venv's python)."""
    steps = [command_1(text)]
    for line in lines(text):
        if line.startswith(COMMAND_1):
            continue
        if line.startswith("eksbench ") and offline(shlex.split(line)[1:]):
            steps.append(line)
        elif line.startswith("pip install "):
            steps.append(line)
        elif m := JUPYTER_LAB.match(line):
            steps.append(f"jupyter nbconvert --to notebook --execute {m.group(1)} --output-dir {shlex.quote(scratch)}")
    for block in blocks(text, "python"):
        if "automation.run(" not in block:  # the AWS lifecycle
            steps.append(f"python3 - <<'PY'\n{block}PY")
    return steps


def front_door_script(text: str, scratch: str) -> str:
    """The steps as one bash script, each echoed before it runs; the first step that fails stops it. Each step is a
    group followed by ``|| exit``: ``set -e`` alone lets a failure in the middle of ``a && b && c`` (command 1's
    set-up) go on to the next step, which then fails for a reason of its own ("eksbench: command not found"). A step
    fails as its exit status says: a README step is one command or an ``&&`` chain (inside the group, ``set -e`` no
    longer stops at a command before a ``;``)."""
    out = ["set -euo pipefail"]
    for step in front_door_steps(text, scratch):
        out += [f"echo {shlex.quote('$ ' + step.splitlines()[0])}", "{", step, "} || exit $?"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(front_door_script(Path(sys.argv[1]).read_text(), sys.argv[2]))
