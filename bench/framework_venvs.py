"""Where a framework's own venv lives, so the local runner starts that framework's workers from it.

A framework whose packages cannot live beside the global torch install, or that is a source build
(Horovod), gets a venv of its own built by ``.ci/setup-framework NAME`` (only when a test or a stack
needs it). Its folder is ``${EKSBENCH_VENVS:-~/.cache/eksbench/venvs}/NAME-<hash>``; the hash covers
``requirements-NAME.txt`` and the build hook with its patches (``.ci/frameworks/NAME.*``,
``NAME-*``), so a changed pin means a new venv rather than a stale one. The script asks this module
for the folder (``python3 -m bench.framework_venvs NAME``): one place computes the name.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
READY = ".eksbench-ready"  # written by .ci/setup-framework once the venv is complete


class VenvMissing(RuntimeError):
    """A framework's venv is not built: the message names the command that builds it."""


def venvs_root(environ: dict | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("EKSBENCH_VENVS") or Path.home() / ".cache" / "eksbench" / "venvs")


def venv_inputs(name: str, repo: Path = REPO) -> list[Path]:
    """The files whose content names the venv: the requirements, then the build hook and its patches."""
    frameworks = repo / ".ci" / "frameworks"
    hooks = sorted({*frameworks.glob(f"{name}.*"), *frameworks.glob(f"{name}-*")})
    return [repo / f"requirements-{name}.txt", *hooks]


def venv_hash(name: str, repo: Path = REPO) -> str:
    digest = hashlib.sha256()
    for path in venv_inputs(name, repo):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def venv_dir(name: str, *, repo: Path = REPO, environ: dict | None = None) -> Path:
    return venvs_root(environ) / f"{name}-{venv_hash(name, repo)}"


def venv_python(name: str, *, repo: Path = REPO, environ: dict | None = None) -> str:
    """The venv's python, or ``VenvMissing`` with the one line that says how to build it."""
    venv = venv_dir(name, repo=repo, environ=environ)
    if not (venv / READY).is_file():
        raise VenvMissing(f"framework {name}: its venv {venv} is not built; run `.ci/setup-framework {name}` "
                          f"(requirements-{name}.txt)")
    return str(venv / "bin" / "python")


if __name__ == "__main__":
    print(venv_dir(sys.argv[1]))
