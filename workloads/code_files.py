"""The sources the pods run and the commit they came from: what the code ConfigMap ships.

Kept apart from ``workloads.experiment_suite_component`` (which registers Pulumi resources) so that the
stack's validation, and so ``bench run --local``, read them without importing Pulumi.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def read_code_files(root: Path = REPO_ROOT) -> dict[str, str]:
    """The sources the pods run, ``{path relative to the repository root: text}``.

    ``workloads/train`` (every ``*.py``, subfolders too) with the package files above it, and
    ``core/**/*.py``, the dependency-free layer the training code imports (``core.contract.train_args``,
    ``core.contract.s3_uri``). They are mounted at ``launch.common.CODE_ROOT`` with the same layout.
    """
    paths = [root / "workloads" / "__init__.py", *sorted((root / "core").rglob("*.py")),
             *sorted((root / "workloads" / "train").rglob("*.py"))]
    return {p.relative_to(root).as_posix(): p.read_text() for p in paths if "__pycache__" not in p.parts}


SHIPPED_PATHS = ("workloads/__init__.py", "core", "workloads/train")


def read_git_commit(root: Path = REPO_ROOT) -> str | None:
    """The last commit that changed the shipped code (read_code_files' paths), ``-dirty`` when
    those files differ from it; None outside a git checkout.

    The commit of the shipped code rather than HEAD: the pods' env is part of the Job, and a
    commit that changes nothing the pods run (docs, infra) must not replace (rerun) the Jobs.
    """
    import subprocess

    try:
        log = subprocess.run(["git", "log", "-1", "--format=%H", "--", *SHIPPED_PATHS], cwd=root,
                             capture_output=True, text=True, timeout=10)
        status = subprocess.run(["git", "status", "--porcelain", "--", *SHIPPED_PATHS], cwd=root,
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = log.stdout.strip()
    if log.returncode != 0 or not commit:
        return None
    return commit + ("-dirty" if status.returncode == 0 and status.stdout.strip() else "")
