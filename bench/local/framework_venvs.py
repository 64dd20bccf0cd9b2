"""Where a framework's own venv is: the one ``.ci/setup-framework <name>`` builds from ``requirements-<name>.txt``.

A framework whose packages cannot live beside torch's (numpy, protobuf: TensorFlow, Paddle), or that
is a source build (Horovod), runs its local processes from a venv of its own. Its path is
``${EKSBENCH_VENVS:-$HOME/.cache/eksbench/venvs}/<name>-<hash>``, ``<hash>`` being the first 16 hex
digits of the sha256 of the requirements file followed by the framework's build hook and its
patches (``.ci/frameworks/<name>.*`` and ``<name>-*``, in name order; most frameworks have none, and
their hash is the requirements file's own sha256). Every clone on one machine shares the venv, and
an edited pin, hook or patch gets a new one. The script asks this module for the path
(``python3 -m bench.local.framework_venvs <name>``), so one place computes it. The script writes
``COMPLETE`` in it last: a venv without that file is being built or was stopped, and is not used.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Mapping

from core.contract.names import ENV_VENVS

# The checkout. Not program.stack_files.ROOT: that module imports PyYAML, and .ci/setup-framework asks this module
# for a path with whatever python3 it finds, before any venv exists; this module needs the standard library only.
ROOT = Path(__file__).resolve().parents[2]

SETUP_SCRIPT = ".ci/setup-framework"
COMPLETE = "COMPLETE"


def requirements_file(name: str, root: Path = ROOT) -> Path:
    return root / f"requirements-{name}.txt"


def build_hooks(name: str, root: Path = ROOT) -> list[Path]:
    """The framework's build hook and its patches (``.ci/frameworks/<name>.*``, ``<name>-*``), in name order."""
    folder = root / ".ci" / "frameworks"
    return sorted((p for p in folder.glob(f"{name}*") if p.name[len(name):][:1] in (".", "-")),
                  key=lambda p: p.name.encode())


def venv_hash(name: str, root: Path = ROOT) -> str:
    """16 hex digits naming the venv; "missing" without a requirements file."""
    digest = hashlib.sha256()
    try:
        for path in (requirements_file(name, root), *build_hooks(name, root)):
            digest.update(path.read_bytes())
    except OSError:
        return "missing"
    return digest.hexdigest()[:16]


def venv_dir(name: str, *, root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> Path:
    """The venv's path (built or not)."""
    base = environ.get(ENV_VENVS) or str(Path(environ.get("HOME", str(Path.home()))) / ".cache/eksbench/venvs")
    return Path(base) / f"{name}-{venv_hash(name, root)}"


def venv_python(name: str, *, root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The venv's python when the venv is complete, else None."""
    venv = venv_dir(name, root=root, environ=environ)
    python = venv / "bin" / "python"
    return python if (venv / COMPLETE).is_file() and python.exists() else None


def missing_venv(name: str, *, root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> str:
    """One line: which venv is missing and the command that builds it."""
    venv = venv_dir(name, root=root, environ=environ)
    return (f"framework {name} runs from a venv of its own, not built yet ({venv}): "
            f"build it with `bash {SETUP_SCRIPT} {name}` (installs {requirements_file(name, root).name})")


if __name__ == "__main__":
    print(venv_dir(sys.argv[1]))
