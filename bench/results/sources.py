"""Where a results source is: an s3:// prefix, a path, or a run handle under the project's results root.

``eksbench report``, ``eksbench compare`` and the Python API (``results.load``, ``results.steps``, the report's
``write_report``) read a SOURCE as the first of:

1. ``s3://...``: an S3 prefix, as given;
2. a path, when it starts with ``/``, ``~`` or ``.`` (``~`` expanded), or when it exists from the working folder;
3. a run handle, ``<stack>[/<run-id>[/<experiment>]]`` (``core.contract.results_location.parse_handle``), under
   the results root (``--results-root``, else ``results/`` in the project found from the working folder);
4. a path from the project folder, so ``results/dev`` names the same folder from any folder of the project.

``eksbench status`` and ``eksbench logs`` take the handle alone (``bench.automation``), with the same parser.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from bench.project import NoProject, default_results_root, find_project_dir, given_results_root
from bench.results.files import exists
from core.contract.results_location import HANDLE, is_handle, quoted

EXPLICIT_PATH = ("/", "~", ".")  # what a path starts with and a handle never does


def _project(project: str | os.PathLike | None) -> Path | None:
    if project is not None:
        return Path(project)
    try:
        return find_project_dir()
    except NoProject:
        return None


def resolve_source(source: str | os.PathLike, *, results_root: str | os.PathLike | None = None,
                   project: str | os.PathLike | None = None) -> str | None:
    """The S3 prefix or local path ``source`` names (the rules above); None when it names nothing that exists.
    ``results_root``, ``project``: None finds them from the working folder (only when a rule needs them); a
    ``results_root`` given is ``~``-expanded, and an empty one a ValueError (``bench.project.given_results_root``)."""
    given = None if results_root is None else given_results_root(results_root, option="results_root")
    text = os.fspath(source)
    if text.startswith("s3://"):
        return text
    path = Path(text).expanduser()
    if text.startswith(EXPLICIT_PATH) or exists(path):
        return str(path) if exists(path) else None
    folder = _project(project)
    root = given if given is not None else folder and default_results_root(folder)
    if root is not None and is_handle(text) and exists(under := Path(root) / text):
        return str(under)
    if folder is not None and exists(in_project := folder / path):
        return str(in_project)
    return None


def resolve_sources(sources: Iterable[str | os.PathLike], *, results_root: str | os.PathLike | None = None
                    ) -> list[str]:
    """Each source resolved, or as given where it names nothing (the reader then says it is not there)."""
    return [resolve_source(s, results_root=results_root) or os.fspath(s) for s in sources]


def no_source(source: str, *, results_root: str | os.PathLike | None = None) -> str:
    """One line for a source that names nothing: where it was looked for, and what to give."""
    looked = "no such path" if str(source).startswith(EXPLICIT_PATH) else "not a path here or in the project"
    if is_handle(source) and not str(source).startswith(EXPLICIT_PATH):
        looked += f", nor a run under {results_root if results_root is not None else 'the results root'}"
    return (f"no results at {quoted(source)} ({looked}): give a run handle ({HANDLE}, e.g. dev or "
            "dev/20261127-091239), a results folder (e.g. results/dev) or an s3:// prefix")
