"""Prepares a catalog dataset and uploads it, resumably, with its manifest written last.

Steps: check the destination is reachable; get the sources (``datasets.sources``) or
generate (``datasets.synthetic``); lay them out (``datasets.layouts``), or tokenize them
into shards (``datasets.token_shards``, the token-shards layout); hash every
file; skip what the store already holds with the same sha256; upload the rest; then
write ``manifest.json`` in one atomic write. An existing manifest that no longer
matches is deleted *before* any upload, so at no moment does a manifest describe
files that are not there. A run interrupted at any point is finished by running it
again, which sends only what is missing.
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

from datasets import layouts, sources, synthetic, token_shards
from datasets.catalog import IMAGEFOLDER, TOKEN_SHARDS, Dataset, dataset
from datasets.errors import DataError
from datasets.file_checks import sha256_file
from datasets.file_manifest import MANIFEST_NAME, FileEntry, build_manifest, manifest_bytes, same_contents
from datasets.progress import Progress
from datasets.store import LocalStore


@dataclass(frozen=True)
class PrepareResult:
    manifest: dict
    uploaded: int  # files sent to the store this run
    skipped: int  # files the store already had with the same sha256
    manifest_written: bool


def hash_plan(plan: dict[str, Path], *, workers: int = 4, progress: Progress | None = None) -> list[FileEntry]:
    def one(item: tuple[str, Path]) -> FileEntry:
        rel, path = item
        entry = FileEntry(rel, path.stat().st_size, sha256_file(str(path)), path)
        if progress:
            progress.advance(1, entry.size)
        return entry

    with ThreadPoolExecutor(workers) as pool:  # hashlib releases the GIL on large buffers
        return list(pool.map(one, sorted(plan.items())))


def build_plan(ds: Dataset, *, source: str | None, work: Path, spec: synthetic.SyntheticSpec | None,
               log: Callable[[str], None], tokens: token_shards.TokenSpec | None = None) -> tuple[dict[str, Path], dict]:
    """The files of the prepared dataset and the parameters that made them."""
    if ds.layout == TOKEN_SHARDS:
        return token_shards.plan_tokens(ds, source=source, work=work, spec=tokens, log=log)
    if ds.generated:
        spec = spec or synthetic.SyntheticSpec()
        out = work / "generated"
        if out.exists():
            shutil.rmtree(out)
        total = spec.images + spec.val_count
        bar = Progress("generating", total, 0)
        plan = synthetic.generate(spec, out, on_file=lambda path, size: bar.advance(1, size))
        bar.close()
        return plan, spec.params()
    found = sources.resolve_sources(ds, source, work)
    log(f"sources: {', '.join(str(p) for p in found.values())}")
    return layouts.plan_for(ds, found, work), {}


def prepare(ds: Dataset, store, *, source: str | None, work: Path, created_by: str, created_at: str,
            spec: synthetic.SyntheticSpec | None = None, delete_extra: bool = False,
            log: Callable[[str], None] = print, tokens: token_shards.TokenSpec | None = None) -> PrepareResult:
    """Makes ``store`` hold the prepared ``ds`` and its manifest. Raises DataError on bad input.

    Files at the destination that the manifest does not list are reported, or deleted
    with ``delete_extra`` (before the manifest is written): an FSx data repository
    association imports everything under the prefix, and ImageFolder would take a
    leftover class folder for a class.
    """
    if not ds.needs_staging:
        raise DataError(f"{ds.name}: nothing to prepare, the training script generates it in memory")
    if source and ds.generated:
        raise DataError(f"--from {source!r}: {ds.name} is generated, it takes no source; "
                        "use --images/--classes/--resolution/--seed")
    if ds.generated:
        spec = synthetic.check_spec(spec or synthetic.SyntheticSpec())
    store.check_access()  # fail on a missing bucket before downloading or generating anything
    work.mkdir(parents=True, exist_ok=True)
    plan, params = build_plan(ds, source=source, work=work, spec=spec, log=log, tokens=tokens)
    if not plan:
        raise DataError(f"{ds.name}: the source holds no files")
    bar = Progress("hashing", len(plan), sum(p.stat().st_size for p in plan.values()))
    files = hash_plan(plan, progress=bar)
    bar.close()
    manifest = build_manifest(dataset=ds.name, layout=ds.layout, files=files, created_by=created_by,
                              created_at=created_at, params=params)
    old = store.read_manifest()
    present = store.present(files, {e["path"]: e["sha256"] for e in old["files"]} if old else None)
    todo = [f for f in files if f.path not in present]
    extras = store.extras(files)
    if extras and not delete_extra:
        log(f"warning: {store} holds {len(extras)} files the manifest does not list, e.g. {extras[0]}; "
            "pass --delete-extra to remove them")
    if not todo and same_contents(old, manifest) and not (extras and delete_extra):
        log(f"{store}: up to date ({len(files)} files), nothing uploaded")
        return PrepareResult(old, 0, len(files), False)
    if old is not None:
        store.delete_manifest()  # the contents are about to change: no manifest until they are complete
    log(f"{store}: {len(files)} files, {len(present)} already there, uploading {len(todo)}")
    bar = Progress("uploading", len(todo), sum(f.size for f in todo))
    try:
        store.put_files(todo, on_file=lambda f: bar.advance(1), on_bytes=lambda n: bar.advance(0, n))
    finally:
        bar.close()
    if extras and delete_extra:
        store.delete(extras)
        log(f"{store}: deleted {len(extras)} files the manifest does not list")
    store.write_manifest(manifest_bytes(manifest))
    log(f"{store}: wrote manifest.json ({manifest['file_count']} files, {manifest['total_bytes']} bytes)")
    return PrepareResult(manifest, len(todo), len(present), True)


def prepare_local(name: str, data_dir: Path, *, created_at: str, log: Callable[[str], None] = lambda m: None) -> Path:
    """``data_dir/<name>``, prepared there as ``eksbench data prepare NAME --to data_dir/NAME`` would (for a dataset
    that needs no source: ``text-bytes``), its work folder a temporary one inside ``data_dir``; for a local run."""
    dest = Path(data_dir) / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{name}-work-") as work:
        prepare(dataset(name), LocalStore(dest), source=None, work=Path(work), created_by="eksbench (local run)",
                created_at=created_at, log=log)
    return dest


class VerifyResult(NamedTuple):
    manifest: dict
    problems: list[str]  # files the manifest lists that are missing or differ
    extras: list[str]  # files (objects, links) at the destination that the manifest does not list
    extra_classes: list[str]  # imagefolder layouts: folders train/<c> or val/<c> the manifest has no file in


def extra_classes(manifest: dict, entries: list[str], folders: list[str]) -> list[str]:
    """The class folders an ImageFolder reader would find that the manifest does not list (imagefolder only).

    torchvision's ImageFolder takes every folder under train/ (val/) for a class, so one more
    folder silently adds a class (and shifts every label after it).
    """
    if manifest.get("layout") != IMAGEFOLDER:
        return []

    def classes(paths, min_parts: int) -> set[str]:
        return {"/".join(p.split("/")[:2]) for p in paths
                if p.split("/")[0] in ("train", "val") and len(p.split("/")) >= min_parts}
    listed = classes((e["path"] for e in manifest["files"]), 3)
    return sorted((classes(folders, 2) | classes(entries, 3)) - listed)


def verify(store) -> VerifyResult:
    """The store's manifest, every problem with the files it lists, and what is there that it does not list."""
    manifest = store.read_manifest()
    if manifest is None:
        raise DataError(f"{store}: no manifest.json; the dataset was never prepared there or its upload "
                        "did not finish (re-run `eksbench data prepare`)")
    problems = store.verify(manifest)
    entries, folders = store.listing()
    keep = {e["path"] for e in manifest["files"]} | {MANIFEST_NAME}
    return VerifyResult(manifest, problems, [e for e in entries if e not in keep],
                        extra_classes(manifest, entries, folders))

