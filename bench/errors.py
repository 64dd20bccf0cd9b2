"""How the command line reports a user's mistake: one message, exit code 2, no traceback."""

from __future__ import annotations

import sys
from typing import Sequence

from bench.terminal import safe
from core.config.fields import shorten

USAGE_ERROR = 2


def fail(message: str) -> int:
    """``error: <message>`` on stderr, with what it quotes of a run or a file made safe for the terminal
    (``bench.terminal.safe``); exit code 2."""
    print(f"error: {safe(message)}", file=sys.stderr)
    return USAGE_ERROR


class Refusal(Exception):
    """A check before a run failed (the local run's, or preflight's on AWS); ``str()`` is the one line to print."""


class NotWritten(OSError):
    """A file for the user could not be written: one line naming it and the system's reason. The write went to
    a temporary file beside it (``workloads.train.common.files.atomic_write``), so the previous file is whole."""

    def __init__(self, path: object, error: OSError):
        super().__init__(f"could not write {path}: {error.strerror or error}; the file that was there, if any, "
                         "is unchanged")


def config_error(stack: str, problems: Sequence[str]) -> int:
    """``error: invalid config for stack 'dev':`` then one indented line per problem; exit code 2."""
    return fail(f"invalid config for stack {shorten(repr(stack), 120)}:\n  " + "\n  ".join(problems))


# Which install brings each requirements file's packages (README, docs/TESTING.md), in the order to look them up.
SETUP = "`bash .ci/setup` (or `pip install -e .` in a venv of your own)"
INSTALLS = (("requirements-run.txt", SETUP), ("requirements.txt", SETUP),
            ("requirements-notebook.txt", "`pip install -e '.[notebook]'`"),
            ("requirements-dev.txt", "`bash .ci/setup-tests`"))
# Modules whose distribution is named otherwise (pip's name, lower case).
DISTRIBUTIONS = {"yaml": "pyyaml", "etcd": "python-etcd", "pil": "pillow", "jupyter": "jupyterlab",
                 "botocore": "boto3", "kubernetes_validate": "kubernetes-validate"}


def missing_module(name: str | None, root) -> str:
    """One line for a package the command imports and this environment lacks: which install brings it."""
    import re
    import sys

    top = (name or "?").split(".")[0]
    dist = DISTRIBUTIONS.get(top.lower(), top.lower().replace("_", "-"))
    for file, install in INSTALLS:
        try:
            text = (root / file).read_text()
        except OSError:
            continue
        if re.search(rf"^{re.escape(dist)}(\[[^\]]*\])?\s*[=<>!~]", text, flags=re.M | re.I):
            return (f"the Python package {dist} ({top}) is not installed in {sys.prefix}: {file} lists it; "
                    f"install it with {install}, then retry")
    return f"the Python module {top} is not installed in {sys.prefix}, and no requirements file of eksbench lists it"
