"""Where a framework's own venv lives, and the one-line error when it is missing.

A framework whose packages cannot live beside torch's (numpy, protobuf pins) gets a venv of its
own, built from ``requirements-<framework>.txt`` by ``.ci/setup-framework <framework>`` at
``${EKSBENCH_VENVS:-~/.cache/eksbench/venvs}/<framework>-<hash>``; the hash is the first 12 hex
digits of the requirements file's SHA-256, so an edited file gets a fresh venv and an old one is
never used by mistake. The set-up script asks this module for the path
(``python3 -m bench.framework_venvs <framework>``), so the rule is spelled once.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Mapping

from bench.stack_files import ROOT

SETUP_SCRIPT = ".ci/setup-framework"
COMPLETE = ".complete"  # written by the set-up script once the venv's packages are all installed


def requirements_file(framework: str, root: Path = ROOT) -> Path:
    return root / f"requirements-{framework}.txt"


def venv_dir(framework: str, environ: Mapping[str, str] = os.environ, root: Path = ROOT) -> Path:
    """``<venvs>/<framework>-<sha256 of requirements-<framework>.txt, 12 hex digits>``."""
    digest = hashlib.sha256(requirements_file(framework, root).read_bytes()).hexdigest()[:12]
    base = environ.get("EKSBENCH_VENVS") or str(Path.home() / ".cache" / "eksbench" / "venvs")
    return Path(base) / f"{framework}-{digest}"


def setup_command(framework: str) -> str:
    return f"bash {SETUP_SCRIPT} {framework}"


def venv_python(framework: str, environ: Mapping[str, str] = os.environ, root: Path = ROOT) -> tuple[str | None, str]:
    """(the venv's python, "") when it is built, else (None, a one-line error naming the command that builds it)."""
    venv = venv_dir(framework, environ, root)
    python = venv / "bin" / "python"
    if python.is_file() and (venv / COMPLETE).is_file():
        return str(python), ""
    return None, (f"framework {framework}: its venv {venv} is not built; "
                  f"build it with `{setup_command(framework)}`")


if __name__ == "__main__":
    print(venv_dir(sys.argv[1]))
