"""Where a framework's own venv is: the one ``.ci/setup-framework <name>`` builds from ``requirements-<name>.txt``.

A framework whose packages cannot live beside torch's (numpy, protobuf: TensorFlow) runs its
local processes from a venv of its own. Its path is
``${EKSBENCH_VENVS:-$HOME/.cache/eksbench/venvs}/<name>-<first 16 hex digits of the requirements
file's sha256>``, computed the same way as the script does, so every clone on one machine shares
it and an edited requirements file gets a new one. The script writes ``COMPLETE`` in it last: a
venv without that file is being built or was stopped, and is not used.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Mapping

from bench.stack_files import ROOT

SETUP_SCRIPT = ".ci/setup-framework"


def requirements_file(name: str, root: Path = ROOT) -> Path:
    return root / f"requirements-{name}.txt"


def venv_dir(name: str, *, root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> Path:
    """The venv's path (built or not); KeyError-free: a missing requirements file hashes as empty."""
    try:
        digest = hashlib.sha256(requirements_file(name, root).read_bytes()).hexdigest()[:16]
    except OSError:
        digest = "missing"
    base = environ.get("EKSBENCH_VENVS") or str(Path(environ.get("HOME", str(Path.home()))) / ".cache/eksbench/venvs")
    return Path(base) / f"{name}-{digest}"


def venv_python(name: str, *, root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The venv's python when the venv is complete, else None."""
    venv = venv_dir(name, root=root, environ=environ)
    python = venv / "bin" / "python"
    return python if (venv / "COMPLETE").is_file() and python.exists() else None


def missing_venv(name: str, *, root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> str:
    """One line: which venv is missing and the command that builds it."""
    venv = venv_dir(name, root=root, environ=environ)
    return (f"framework {name} runs from a venv of its own, not built yet ({venv}): "
            f"build it with `bash {SETUP_SCRIPT} {name}` (installs {requirements_file(name, root).name})")
