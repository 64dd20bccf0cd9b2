"""Checks a directory of files against a dataset's manifest: sizes and sha256s.

One definition of "this copy matches the manifest", shared by everything that checks
files: the staging Job in the pod (``datasets.stage``), the laptop's ``verify`` and
resumable uploads (``datasets.store``, ``datasets.prepare``) and the source checks
(``datasets.sources``), so the pod and the laptop agree on what a good copy is. The
staging ConfigMap ships this file to the pod next to ``stage.py``, so it is standard
library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor

MANIFEST_NAME = "manifest.json"  # at the dataset's root: written last, so present means complete
CHUNK = 4 * 1024 * 1024  # read and hash in 4 MiB blocks, never a whole file at once
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
MAX_SIZE = 2 ** 63 - 1  # no file system or S3 object is larger
NAME_MAX, PATH_MAX = 255, 4096  # bytes per path component and per path, as on Linux
SHOWN = 200  # a hostile value is quoted in a message cut to about this many characters


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text) - SHOWN} more characters)"


def path_problem(path: object) -> str:
    """'' when ``path`` is a safe manifest path: relative, "/"-separated, staying under the root; else why not.

    The rules of ``relative_path_problem``, and not the manifest's own name at the root.
    """
    problem = relative_path_problem(path)
    if not problem and path == MANIFEST_NAME:
        return f"path {path!r} is the manifest itself"
    return problem


def relative_path_problem(path: object) -> str:
    """'' when ``path`` is relative, "/"-separated and stays under whatever root it is joined to; else why not.

    Rejected: non-strings, empty paths and components ("a//b", "a/"), "." and ".." components,
    absolute paths, backslashes, NUL and other control characters, text that is not valid
    UTF-8 (lone surrogates), and components or paths longer than Linux allows. Manifests
    (``path_problem``) and results copied home from S3 (``bench.results.safe_paths``) both use it.
    """
    if not isinstance(path, str):
        return f"path {_short(path)} is not a string"
    if not path:
        return "empty path"
    if path.startswith("/"):
        return f"path {_short(path)} is absolute"
    if "\\" in path:
        return f"path {_short(path)} contains a backslash"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return f"path {_short(path)} contains a NUL or control character"
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        return f"path {_short(path)} is not valid UTF-8"
    parts = path.split("/")
    if "" in parts:
        return f"path {_short(path)} has an empty component"
    if "." in parts or ".." in parts:
        return f"path {_short(path)} has a '.' or '..' component"
    if len(encoded) > PATH_MAX or any(len(p.encode()) > NAME_MAX for p in parts):
        return f"path {_short(path)} is longer than a file system allows"
    return ""


def check_manifest(m: object, where: str) -> dict:
    """``m`` when it is a well-formed manifest; ValueError naming ``where`` otherwise.

    The one validation of a manifest, wherever one is read (``file_manifest.parse_manifest``
    for the laptop, ``stage.read_manifest_s3`` and the staged copy's own manifest in the pod):
    a "files" list of {"path", "size", "sha256"} with safe, distinct paths (``path_problem``;
    no path is also another's folder), integer sizes and hex sha256s, and "file_count" and
    "total_bytes" that agree with the list.
    """
    def bad(reason: str) -> ValueError:
        return ValueError(f"{where} is not an eksbench manifest: {reason}")

    if not isinstance(m, dict):
        raise bad(f"expected a JSON object, got {type(m).__name__}")
    files = m.get("files")
    if not isinstance(files, list):
        raise bad("no 'files' list")
    paths: set[str] = set()
    total = 0
    for i, e in enumerate(files):
        if not isinstance(e, dict):
            raise bad(f"files[{i}] is not an object: {_short(e)}")
        missing = [k for k in ("path", "size", "sha256") if k not in e]
        if missing:
            raise bad(f"files[{i}] has no {', '.join(repr(k) for k in missing)}: {_short(e)}")
        problem = path_problem(e["path"])
        if problem:
            raise bad(f"files[{i}]: {problem}")
        size = e["size"]
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_SIZE:
            raise bad(f"files[{i}] ({e['path']!r}): size {_short(size)} is not a byte count")
        if not isinstance(e["sha256"], str) or not SHA256_HEX.match(e["sha256"]):
            raise bad(f"files[{i}] ({e['path']!r}): sha256 {_short(e['sha256'])} is not 64 lowercase hex digits")
        if e["path"] in paths:
            raise bad(f"files[{i}]: path {e['path']!r} is listed twice")
        paths.add(e["path"])
        total += size
    for path in paths:  # "a" and "a/b" cannot both be files
        parts = path.split("/")
        for n in range(1, len(parts)):
            if "/".join(parts[:n]) in paths:
                raise bad(f"path {'/'.join(parts[:n])!r} is listed as a file and as the folder of {path!r}")
    for key, value in (("file_count", len(files)), ("total_bytes", total)):
        if key not in m:
            raise bad(f"no {key!r}")
        if m[key] != value or isinstance(m[key], bool):
            raise bad(f"{key!r} is {_short(m[key])}, but the files listed make {value}")
    if not isinstance(m.get("layout", ""), str):
        raise bad(f"'layout' {_short(m['layout'])} is not a string")
    return m


def parse_manifest(raw: bytes, where: str) -> dict:
    """The manifest in ``raw`` (JSON, UTF-8); ValueError naming ``where`` if it is not one (``check_manifest``)."""
    try:
        m = json.loads(raw)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"{where} is not an eksbench manifest: not JSON in UTF-8 ({_short(str(e))[1:-1]})") from None
    return check_manifest(m, where)


def read_regular_file(path: str) -> bytes:
    """The bytes of the regular file ``path``; OSError when it is missing, a symbolic link, a FIFO, a folder..."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file", path)
        return f.read()


def resolve_under(root: str, rel: str) -> str:
    """The real path of ``root/rel``; ValueError when it is not a safe path or leads out of ``root``
    (through ".." or a symbolic link planted anywhere on the way)."""
    problem = path_problem(rel)
    if problem:
        raise ValueError(problem)
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, rel))
    if real == real_root or os.path.commonpath([real_root, real]) != real_root:
        raise ValueError(f"{rel}: leads outside {root} (through a symbolic link)")
    return real


def sha256_file(path: str) -> str:
    """The hex sha256 of a file, read in chunks (never the whole file at once)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def check_file(root: str, entry: dict, *, hash_contents: bool = True) -> str:
    """'' when ``root/entry.path`` matches the manifest entry; otherwise what is wrong.

    Nothing outside ``root`` is looked at: a path that leads out of it (``resolve_under``)
    is a problem, without its size or contents; only regular files are read, opened
    without following a symbolic link planted after the check.
    """
    try:
        path = resolve_under(root, entry["path"])
    except ValueError as e:
        return f"{_short(entry['path'])[1:-1]}: refused, {e}"
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return f"{entry['path']}: missing"
    if not stat.S_ISREG(st.st_mode):
        return f"{entry['path']}: not a regular file"
    if st.st_size != entry["size"]:
        return f"{entry['path']}: size {st.st_size}, manifest says {entry['size']}"
    if hash_contents:
        try:
            digest = _sha256_regular(path)
        except OSError as e:
            return f"{entry['path']}: cannot read ({e.strerror})"
        if digest != entry["sha256"]:
            return f"{entry['path']}: sha256 {digest[:16]}..., manifest says {entry['sha256'][:16]}..."
    return ""


def _sha256_regular(path: str) -> str:
    """``sha256_file`` for a path inside a dataset: never follows a final symbolic link, never blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        h = hashlib.sha256()
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def check_tree(root: str, manifest: dict, *, hash_contents: bool = True, workers: int = 8) -> list[str]:
    """Every problem found checking ``root`` against ``manifest``, one line per file."""
    with ThreadPoolExecutor(workers) as pool:
        results = pool.map(lambda e: check_file(root, e, hash_contents=hash_contents), manifest["files"])
        return [r for r in results if r]
