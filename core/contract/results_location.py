"""Where results and datasets live: the one spelling of the layout, and the one rule for the bucket.

In the results bucket, each experiment of each run has ``<project>/<stack>/<run>/<experiment>/``; an
experiment with ``repeats: N`` (N > 1) keeps each run in ``<experiment>/repeat_<k>/`` (k = 1..N),
the same files in each; prepared datasets have ``datasets/<name>/``. On the user's machine the
results of a run are copied to ``<results root>/<stack>/<run>/<experiment>/`` (``./results/...`` by
default; one project per checkout, so no project level). ``ResultsLocation`` names a place at any depth of that layout, and
the program (the IAM prefix, the exported ``results_prefix``, each Job's results URI), ``bench``
(preflight, collect, status, logs) and the home stack's outputs all ask it, so they cannot disagree.

The results bucket of an experiment stack is ``results.bucket``, or the one its home stack
(``results.home_stack``) exports: ``results_bucket`` decides, for the program (through a
StackReference), preflight and ``bench status``/``bench logs`` (through the CLI) alike.

Standard library only: pure, and shippable to pods like the rest of ``spec``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from core.contract.names import LOGS_DIR, SUMMARY_FILE

DATASETS_PREFIX = "datasets/"
# A repeat's folder under its experiment's: the underscore keeps it apart from experiment names
# (core.config.model.NAME has none), so a reader can tell <experiment>/repeat_2/ from an experiment's folder.
REPEAT_FOLDER = "repeat_{}"
_REPEAT = re.compile(r"repeat_([1-9][0-9]{0,5})")


# A folder name's limit in bytes (NAME_MAX on Linux, and on ext4, XFS, APFS and NTFS alike): a longer name
# cannot be made or opened (ENAMETOOLONG), whatever the folder above it.
MAX_SEGMENT_BYTES = 255
# A run id names a results folder, a Pulumi config value (eksbench:run_id) and part of a rendezvous id: letters,
# digits, ".", "_" and "-", starting with a letter or digit, at most 64 characters.
MAX_RUN_ID = 64
RUN_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_RUN_ID - 1}}}")
RUN_ID_RULE = f'use 1-{MAX_RUN_ID} letters, digits, ".", "_" or "-", starting with a letter or digit, e.g. "try-2"'


def segment_problem(name: Any) -> str | None:
    """Why ``name`` cannot be one folder of the layout, None when it can: a results path built from it must
    never leave its root (a stack named "..", an S3 key's "../" part, a run id with a slash), and must be
    a name the file system can hold."""
    if not isinstance(name, str) or not name:
        return "is empty or not text"
    if name in (".", ".."):
        return f"is {name!r}, which names a folder above or at its own"
    if "/" in name or "\\" in name:
        return "holds a path separator"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "holds a control character"
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_SEGMENT_BYTES:
        return f"is {size:,} bytes long, past a folder name's {MAX_SEGMENT_BYTES}"
    return None


def quoted(value: Any, limit: int = 80) -> str:
    """``value``'s repr for a message, cut to about ``limit`` characters with the number left out said."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def check_run_id(run_id: Any) -> str:
    """``run_id`` when it can name a run (``RUN_ID``); ValueError, one line naming the value (cut) and the rule,
    when not. Every command and API function that takes a run id asks this before a path is built from it."""
    if isinstance(run_id, str) and len(run_id) > MAX_RUN_ID:
        raise ValueError(f"run id {quoted(run_id)} is {len(run_id):,} characters long, past the limit of "
                         f"{MAX_RUN_ID}: {RUN_ID_RULE}")
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {quoted(run_id)}: {RUN_ID_RULE}")
    return run_id


# A run handle names results the same way in every command and in the Python API: a stack, one of its runs, one
# experiment of that run, each a folder under the results root. A part is a stack's, run id's or experiment's
# name: letters, digits, ".", "_" or "-", never starting with "." (so no handle is ".", ".." or a hidden folder).
HANDLE = "<stack>[/<run-id>[/<experiment>]]"
_HANDLE_PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class RunHandle:
    """``dev``, ``dev/20261127-091239`` or ``dev/20261127-091239/resnet50-synthetic``: a stack's runs, one run,
    or one experiment of it (``parse_handle``)."""

    stack: str
    run: str | None = None
    experiment: str | None = None

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in (self.stack, self.run, self.experiment) if p is not None)

    def __str__(self) -> str:
        return "/".join(self.parts)

    def local_dir(self, results_root: str | Path) -> Path:
        """``<results root>/<stack>[/<run>[/<experiment>]]``."""
        return Path(results_root).joinpath(*self.parts)


def is_handle(text: Any) -> bool:
    """Whether ``text`` has a run handle's shape (one trailing "/" allowed, as a shell completes a folder)."""
    if not isinstance(text, str):
        return False
    parts = text[:-1].split("/") if text.endswith("/") else text.split("/")
    return 1 <= len(parts) <= 3 and all(_HANDLE_PART.fullmatch(p) and not segment_problem(p) for p in parts)


def parse_handle(text: Any) -> RunHandle:
    """The handle ``text`` names; ValueError, one line with the value, the shape and an example, when it is not
    one."""
    if not is_handle(text):
        raise ValueError(f"{quoted(text)} is not a run handle: give {HANDLE}, each part letters, digits, '.', '_' "
                         "or '-' (not starting with '.'), e.g. dev or dev/20261127-091239/resnet50-synthetic")
    return RunHandle(*text.rstrip("/").split("/"))


def repeat_folder(k: int) -> str:
    """The folder of repeat ``k`` (1-based) under its experiment's folder."""
    return REPEAT_FOLDER.format(k)


def repeat_number(folder: str) -> int | None:
    """``k`` for a repeat's folder name (``repeat_<k>``), None for any other name."""
    m = _REPEAT.fullmatch(folder)
    return int(m.group(1)) if m else None


def is_run_summary(rel: str) -> bool:
    """Whether ``rel``, a path relative to a run's folder, is an experiment's summary (``<exp>/summary.json``)
    or one of its repeats' (``<exp>/repeat_<k>/summary.json``)."""
    parts = rel.split("/")
    return parts[-1] == SUMMARY_FILE and (len(parts) == 2 or (len(parts) == 3 and repeat_number(parts[1]) is not None))


def log_name(rel: str) -> str | None:
    """``node-0`` for ``logs/node-0.log``, ``repeat_2/node-0`` for a repeat's, from a path relative to the
    experiment's folder; None for any other file."""
    parts = rel.split("/")
    if len(parts) >= 2 and parts[0] == LOGS_DIR:
        return PurePosixPath(parts[-1]).stem
    if len(parts) == 3 and parts[1] == LOGS_DIR and repeat_number(parts[0]):
        return f"{parts[0]}/{PurePosixPath(parts[2]).stem}"
    return None


@dataclass(frozen=True)
class ResultsLocation:
    """A place in the results layout, as deep as the parts given: the project, a stack, a run, an
    experiment, one repeat of it (1-based). ``bucket`` is needed for URIs only (the program knows it
    late, as a Pulumi Output)."""

    bucket: str | None
    project: str
    stack: str | None = None
    run: str | None = None
    experiment: str | None = None
    repeat: int | None = None

    def __post_init__(self) -> None:
        for level in ("project", "stack", "run", "experiment"):
            value = getattr(self, level)
            why = None if value is None and level != "project" else segment_problem(value)
            if why:
                raise ValueError(f"{level}={quoted(value)}: {why}; a level of the results layout is one folder name")
        parts = (self.stack, self.run, self.experiment, self.repeat)
        if any(later is not None for i, p in enumerate(parts) if p is None for later in parts[i + 1:]):
            raise ValueError(f"{self!r}: a level of the results layout is missing above one that is given")

    @property
    def parts(self) -> tuple[str, ...]:
        levels = (self.project, self.stack, self.run, self.experiment,
                  None if self.repeat is None else repeat_folder(self.repeat))
        return tuple(p for p in levels if p is not None)

    @property
    def prefix(self) -> str:
        """The key prefix in the bucket: ``<project>/[<stack>/[<run>/[<experiment>/]]]``."""
        return "".join(f"{p}/" for p in self.parts)

    @property
    def uri(self) -> str:
        """``s3://<bucket>/<prefix>``."""
        if not self.bucket:
            raise ValueError(f"{self!r}: no bucket, so no S3 URI")
        return f"s3://{self.bucket}/{self.prefix}"

    def child(self, name: str) -> "ResultsLocation":
        """One level down: the stack's run ``name``, or the run's experiment ``name``."""
        for level in ("stack", "run", "experiment"):
            if getattr(self, level) is None:
                return replace(self, **{level: name})
        raise ValueError(f"{self!r}: an experiment is the deepest named level; its repeats: repeat_run")

    def repeat_run(self, k: int) -> "ResultsLocation":
        """Repeat ``k`` (1-based) of this experiment; ``k`` 0 is the experiment itself (it has no repeats)."""
        if self.experiment is None or self.repeat is not None:
            raise ValueError(f"{self!r}: repeats sit under an experiment")
        return replace(self, repeat=k) if k else self

    def key(self, name: str) -> str:
        """The key of a file kept at this level, beside what is below it (e.g. the run's ``autostop.json``)."""
        return f"{self.prefix}{name}"

    def in_bucket(self, bucket: str) -> "ResultsLocation":
        return replace(self, bucket=bucket)

    def local_dir(self, results_root: str | Path) -> Path:
        """Where ``bench`` keeps this place on the user's machine: ``<results root>/<stack>/...``."""
        return Path(results_root).joinpath(*self.parts[1:])


def datasets_uri(bucket: str) -> str:
    """The prepared datasets in a results bucket: ``s3://<bucket>/datasets/``."""
    return f"s3://{bucket}/{DATASETS_PREFIX}"


def home_bucket(name: str, bucket: Any, home_region: Any, *, region: str) -> str:
    """The bucket a home stack's outputs name, or ValueError saying what to do."""
    if not isinstance(bucket, str) or not bucket:
        raise ValueError(f"results.home_stack={name!r}: that stack has no output 'bucket'; create it first "
                         f"(pulumi up -s {name.rsplit('/', 1)[-1]}, a stack with eksbench:role: home), or fix "
                         "the name (<organization>/<project>/<stack>)")
    # FSx links only to a bucket of its own region, and cross-region staging bills per GB.
    if home_region and home_region != region:
        raise ValueError(f"results.home_stack={name!r}: that home stack is in {home_region}, this stack in "
                         f"{region}; name a home stack of {region} (a copy of Pulumi.home.yaml with "
                         f"aws:region: {region})")
    return bucket


def results_bucket(results: Any, home_outputs: Mapping[str, Any] | None, *, region: str) -> str | None:
    """An experiment stack's results bucket: ``results.bucket`` when the stack names no home stack, else
    the bucket its home stack's outputs (``bucket``, ``region``) name, checked by ``home_bucket``.
    ``results`` is a ``core.config.model.Results``; None when the home stack's outputs are unknown."""
    if not results.home_stack:
        return results.bucket
    if home_outputs is None:
        return None
    return home_bucket(results.home_stack, home_outputs.get("bucket"), home_outputs.get("region"), region=region)
