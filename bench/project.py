"""Which eksbench project a command works on: the folder with ``Pulumi.yaml`` and the ``Pulumi.<stack>.yaml`` files.

The command line runs from any folder. Like git finding its repository, it takes the first of:
``--project-dir``, ``$EKSBENCH_PROJECT_DIR`` (either may name a folder of stack files alone), the nearest folder at
or above the working folder whose ``Pulumi.yaml`` names the eksbench project, and the checkout this package runs
from (``pip install -e .``).
Local results default to ``<project>/results``, so a run started from a sub-folder lands beside the others.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Mapping

from core.config.pulumi_config import PROJECT
from core.contract.names import ENV_PROJECT_DIR, LOCAL_RESULTS_ROOT
from core.contract.results_location import HANDLE
from program.stack_files import ROOT

PROJECT_FILE = "Pulumi.yaml"
_NAME = re.compile(r"^name:\s*['\"]?([^'\"#\s]+)", re.MULTILINE)


class NoProject(ValueError):
    """No eksbench project where one was asked for or looked for: the message says where and what to do."""


def is_project(folder: Path) -> bool:
    """``folder/Pulumi.yaml`` exists and names the eksbench project (read as text: no YAML parser for one key)."""
    try:
        match = _NAME.search((folder / PROJECT_FILE).read_text(errors="replace")[:65536])
    except OSError:
        return False
    return bool(match) and match.group(1) == PROJECT


def has_stacks(folder: Path) -> bool:
    """A folder named on purpose may hold stack files alone (a folder of experiments beside a checkout)."""
    try:
        return folder.is_dir() and any(p.name != PROJECT_FILE for p in folder.glob("Pulumi.*.yaml"))
    except OSError:
        return False


def find_project_dir(given: str | os.PathLike | None = None, *, cwd: Path | None = None,
                     environ: Mapping[str, str] = os.environ, home: Path = ROOT) -> Path:
    """The project folder, resolved; NoProject when a given folder is not one or none is found."""
    for where, value in (("--project-dir", given), (f"${ENV_PROJECT_DIR}", environ.get(ENV_PROJECT_DIR))):
        if value:
            folder = Path(value).expanduser().resolve()
            if not (is_project(folder) or has_stacks(folder)):
                raise NoProject(f"{where}={str(value)!r}: no {PROJECT_FILE} of project {PROJECT!r} and no "
                                f"Pulumi.<stack>.yaml there; give the folder of an eksbench checkout or of your stack "
                                "files")
            return folder
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if is_project(folder):
            return folder
    if is_project(home):
        return home
    raise NoProject(f"no eksbench project at or above {start} (a folder with a {PROJECT_FILE} named {PROJECT!r}): "
                    f"run from a checkout, or pass --project-dir DIR or set ${ENV_PROJECT_DIR}")


def default_results_root(project_dir: str | os.PathLike) -> Path:
    return Path(project_dir) / LOCAL_RESULTS_ROOT


def given_results_root(value: str | os.PathLike, *, option: str = "--results-root") -> Path:
    """A results root as given (``--results-root``, or ``results_root=`` of the Python API), ``~`` expanded as a
    shell would; ValueError, one line naming ``option``, the value and what is allowed, for an empty or blank one
    (it would put results in the working folder itself)."""
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else ""
    if not isinstance(text, str) or not text.strip():
        example = f"{option}{' ' if option.startswith('-') else '='}~/eksbench-results"
        raise ValueError(f"{option}={str(value)!r}: empty; give a folder, e.g. {example}, or leave it out for "
                         f"{LOCAL_RESULTS_ROOT}/ in the project")
    return Path(text).expanduser()


def nearest_existing(path: Path) -> Path:
    """``path``, or the nearest folder above it that exists: where a results root not yet made would be made."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def results_root_problem(root: str | os.PathLike) -> str | None:
    """Why results cannot be written under ``root`` (it or a folder above it is a file, or its nearest existing
    folder refuses a new folder: read-only, no permission, /proc), as one line naming --results-root; None when
    they can. Probed with a folder made and removed at once in the nearest existing one, so nothing is left
    behind, and root (who passes every permission check) is told the truth too."""
    shown = f"--results-root={str(root)!r}"
    try:
        path = Path(root).absolute()
        where = nearest_existing(path)
        folder = where.is_dir()
    except (OSError, ValueError) as e:  # a folder above it not readable, a NUL in the name
        return f"{shown}: not a usable path ({e}), choose another folder"
    if not folder:
        return f"{shown}: {'it' if where == path else where} is not a folder, choose another folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".eksbench-probe-", dir=where))
    except OSError as e:
        return f"{shown}: {where} {_refusal(e, 'folders')}, choose another folder"
    return None


def _refusal(e: OSError, what: str) -> str:
    """Why a folder refused a new entry (``what``: folders, files), as the end of a sentence naming it."""
    return {errno.EROFS: "is on a read-only file system", errno.EACCES: "is not writable for this user",
            errno.EPERM: f"does not allow new {what}", errno.ENOSPC: "has no space left"}.get(
        e.errno, f"does not allow new {what} ({e.strerror or e})")


def out_file_problem(out: str | os.PathLike, *, flag: str = "--out", example: str = "report.html") -> str | None:
    """Why a file cannot be written at ``out`` (a folder or not a regular file is there, its folder is missing,
    is not a folder or refuses a new file), as one line naming ``flag``; None when it can. Checked before the
    work that fills the file, with a file made and removed at once in its folder (the write itself goes to a
    temporary file there, then renames it over ``out``: ``workloads.train.common.files.atomic_write``)."""
    shown = f"{flag}={str(out)!r}"
    try:
        path = Path(out).resolve()  # a link to a file: the file it names is the one replaced
        if path.is_dir():
            return f"{shown}: is a folder; name a file, e.g. {flag} {Path(out) / example}"
        if path.exists() and not path.is_file():
            return f"{shown}: is not a regular file (a pipe or a device); name a file, e.g. {flag} {example}"
        if not path.parent.is_dir():
            what = "is not a folder" if path.parent.exists() else "does not exist"
            return f"{shown}: {path.parent} {what}; create the folder or choose another place"
    except (OSError, ValueError, RuntimeError) as e:  # a folder above it not readable, a NUL, a symlink loop
        return f"{shown}: not a usable path ({e}), choose another file"
    try:
        fd, probe = tempfile.mkstemp(prefix=".eksbench-probe-", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"{shown}: {path.parent} {_refusal(e, 'files')}, choose another place"
    return None


def stack_path_problem(given: str, argv: list[str], project_dir: str | os.PathLike) -> str | None:
    """One line when ``given``, where a stack name is expected, is a path: a stack file's (``dir/Pulumi.x.yaml``)
    or a folder of stack files; it names the command that works (``argv`` with ``--project-dir <dir> <stack>``).
    None for anything else, a stack name or a run's handle (``dev/run-001``), which other checks judge."""
    from program.stack_files import available_stacks, stack_file_parts

    parts, what, there = stack_file_parts(given), "a stack file's path", ""
    if parts is None and ("/" in given or os.sep in given) and has_stacks(Path(given).expanduser()):
        stacks = available_stacks(Path(given).expanduser())
        parts, what = (given.rstrip("/" + os.sep) or "/", stacks[0] if len(stacks) == 1 else "STACK"), "a folder of stack files"
        there = f" (STACK: {', '.join(stacks)})" if len(stacks) > 1 else ""
    if parts is None:
        return None
    folder, stack = parts
    same = Path(folder).expanduser().resolve() == Path(project_dir).resolve()
    command = _with_stack(argv, given, stack, None if same else folder)
    return f"stack={json.dumps(given)}: is {what} where a stack name is expected; use: {command}{there}"


def _with_stack(argv: list[str], given: str, stack: str, folder: str | None) -> str:
    """The command line ``argv`` with ``stack`` for ``given`` and, when ``folder``, ``--project-dir folder`` (any
    other --project-dir dropped), as one shell line."""
    import shlex

    words, skip = [], False
    for word in argv:
        if skip or word.startswith("--project-dir="):
            skip = False
            continue
        if word == "--project-dir" and folder is not None:
            skip = True
            continue
        words.append(stack if word == given else word)
    if folder is not None:
        at = next((i for i, w in enumerate(words) if not w.startswith("-")), len(words) - 1) + 1
        words[at:at] = ["--project-dir", folder]
    return "eksbench " + shlex.join(words)


def add_project_options(parser: argparse.ArgumentParser, *, results: bool = True) -> None:
    """``--project-dir`` and (``results``) ``--results-root``, both settled by ``bench.cli.settle_paths``."""
    parser.add_argument("--project-dir", metavar="DIR",
                        help=f"the eksbench project (its {PROJECT_FILE} and Pulumi.<stack>.yaml); default: "
                             f"${ENV_PROJECT_DIR}, else the nearest one at or above this folder")
    if results:
        add_results_root_option(parser)


def add_results_root_option(parser: argparse.ArgumentParser) -> None:
    """``--results-root``, settled by ``bench.cli.settle_paths`` (``given_results_root``, then the default)."""
    parser.add_argument("--results-root", metavar="DIR",
                        help=f"where local results live, and where run handles ({HANDLE}) are looked up "
                             f"(default: {LOCAL_RESULTS_ROOT}/ in the project; ~ expands)")
