"""Finds a dataset's source files: in ``--from``, in the work directory, or at their URL.

Every file with a published checksum is checked before anything is converted or
uploaded, so a truncated download or the wrong archive stops the run with one line
naming the file, instead of producing a dataset that fails on the GPU nodes.
URLs are fetched with urllib; where the network is unreachable the error says so and
tells the user to download the file and pass ``--from``.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path

from datasets.catalog import Dataset, SourceFile
from datasets.errors import DataError
from datasets.file_checks import CHUNK

URL_SCHEMES = ("http://", "https://")


def is_url(text: str) -> bool:
    return text.startswith(URL_SCHEMES)


def fetch_url(url: str, dest: Path, *, timeout: float = 30.0) -> Path:
    """Downloads ``url`` to ``dest`` (through ``dest.part``, renamed when complete)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out:
            for block in iter(lambda: response.read(CHUNK), b""):
                out.write(block)
    except (urllib.error.URLError, OSError, ValueError) as e:
        tmp.unlink(missing_ok=True)
        reason = getattr(e, "reason", None) or e
        raise DataError(f"cannot reach URL {url}: {reason}; download it yourself and pass --from PATH") from None
    os.replace(tmp, dest)
    return dest


def check_source(path: Path, spec: SourceFile) -> None:
    """Raises DataError unless ``path`` has the size and checksum the catalog publishes for it."""
    if spec.size is not None and path.stat().st_size != spec.size:
        raise DataError(f"{path}: size {path.stat().st_size} bytes, but the published {spec.filename} is "
                        f"{spec.size} bytes; re-download it from {spec.url or 'its source'}")
    if not (spec.md5 or spec.sha256_prefix):
        return
    h = hashlib.md5() if spec.md5 else hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    digest = h.hexdigest()
    want = spec.md5 or spec.sha256_prefix
    if not digest.startswith(want):
        kind = "md5" if spec.md5 else "sha256"
        raise DataError(f"checksum mismatch for {path}: {kind} {digest}, expected {want} (the published "
                        f"{spec.filename}); re-download it from {spec.url or 'its source'}")


def resolve_sources(ds: Dataset, from_arg: str | None, work: Path) -> dict[str, Path]:
    """Source filename -> a checked local archive, or the already-extracted folder.

    ``--from`` may be a URL or a file (datasets with one source file), or a directory
    holding the source files by name, or the folders they unpack to. Without it,
    files come from ``work`` (an earlier download) or their URL.
    """
    if ds.user_supplied:
        if not from_arg:
            raise DataError(f"{ds.name}: --from PATH is required: {ds.user_supplied}")
        path = Path(from_arg)
        if not path.is_dir():
            raise DataError(f"--from {from_arg!r}: not a directory; {ds.name} needs {ds.user_supplied}")
        return {"": path}
    if from_arg and is_url(from_arg):
        if len(ds.sources) != 1:
            raise DataError(f"--from {from_arg!r}: {ds.name} has {len(ds.sources)} source files "
                            f"({', '.join(s.filename for s in ds.sources)}); pass a directory holding them")
        spec = ds.sources[0]
        path = fetch_url(from_arg, work / spec.filename)
        check_source(path, spec)
        return {spec.filename: path}
    if from_arg:
        given = Path(from_arg)
        if not given.exists():
            raise DataError(f"--from {from_arg!r} does not exist; pass the downloaded "
                            f"{' / '.join(s.filename for s in ds.sources)} or a directory holding it")
        if given.is_file():
            if len(ds.sources) != 1:
                raise DataError(f"--from {from_arg!r}: {ds.name} needs {len(ds.sources)} files "
                                f"({', '.join(s.filename for s in ds.sources)}); pass a directory holding them")
            check_source(given, ds.sources[0])
            return {ds.sources[0].filename: given}
    found: dict[str, Path] = {}
    for spec in ds.sources:
        found[spec.filename] = _one_source(spec, Path(from_arg) if from_arg else None, work)
    return found


def _one_source(spec: SourceFile, folder: Path | None, work: Path) -> Path:
    if folder is not None:
        if (folder / spec.filename).is_file():
            check_source(folder / spec.filename, spec)
            return folder / spec.filename
        if spec.extracted and (folder / spec.extracted).is_dir():
            return folder / spec.extracted
        if folder.name == spec.extracted and folder.is_dir():
            return folder
    cached = work / spec.filename
    if cached.is_file():
        check_source(cached, spec)
        return cached
    if not spec.url:
        where = f"in {folder}" if folder else "(no --from given)"
        raise DataError(f"{spec.filename} not found {where} and it has no download URL; pass --from DIR")
    fetch_url(spec.url, cached)
    check_source(cached, spec)
    return cached
