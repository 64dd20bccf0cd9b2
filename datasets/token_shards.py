"""Makes a pre-tokenized dataset (layout ``token-shards``): documents in, ``train/`` and ``val/`` shards out.

The documents stream through the tokenizer in groups of ``DOCS_PER_GROUP``; each goes to the held-out ``val``
split when its number (from 0, in input order) is ``val_every - 1`` modulo ``val_every`` (1 in 20: 5%), to
``train`` otherwise: a rule that needs no count of the documents beforehand, so a corpus streams once, and
that spreads the held-out documents over the whole corpus. Each document is its ids, the tokenizer's ``bos``
before them where it has one and ``eot`` after. A split's shards hold ``shard_tokens`` tokens each (the last
fewer), written straight to a temporary file in the split's folder and renamed when full: memory holds one
group of documents, never a shard. Nothing is written outside the output folder (its shard paths are ours, and
checked with ``file_checks.resolve_under``).

The output folder is ``<work>/tokens``; ``.complete.json`` there, written last, records what made it, so a
second ``prepare`` with the same inputs (an upload that failed half-way) reuses the shards instead of
tokenizing again. ``datasets.prepare`` then hashes, uploads and writes ``manifest.json`` (with the token section
of ``core.contract.token_shards`` in its params) last, as for every dataset.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from core.catalog.llm import LLAMA3_VOCAB
from core.contract.token_shards import DTYPES, PARAMS_KEY, SPLITS, dtype_for, shard_path, token_section
from datasets import token_sources
from datasets.catalog import Dataset
from datasets.errors import DataError
from datasets.file_checks import resolve_under

DOCS_PER_GROUP = 1024  # documents tokenized together (tiktoken spreads a group over its threads)
COMPLETE = ".complete.json"
REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class TokenSpec:
    """What ``eksbench data prepare`` may change of a token dataset (None: the catalog's)."""
    max_tokens: int | None = None  # stop after the document that reaches this many tokens (both splits)
    shard_tokens: int | None = None


class ShardWriter:
    """One split's shards under ``out/<split>/``: tokens appended to a temporary file, renamed when full."""

    def __init__(self, out: Path, split: str, *, dtype: str, shard_tokens: int):
        self.out, self.split, self.dtype, self.shard_tokens = out, split, dtype, shard_tokens
        (out / split).mkdir(parents=True, exist_ok=True)
        self.done: list[tuple[str, int]] = []
        self._file: Any = None
        self._tmp, self._count = "", 0

    def add(self, ids: Any) -> None:
        while len(ids):
            if self._file is None:
                fd, self._tmp = tempfile.mkstemp(dir=self.out / self.split, prefix=".shard-", suffix=".part")
                self._file, self._count = os.fdopen(fd, "wb"), 0
            room = self.shard_tokens - self._count
            self._file.write(ids[:room].astype(self.dtype).tobytes())
            self._count += min(room, len(ids))
            ids = ids[room:]
            if self._count == self.shard_tokens:
                self._finish()

    def _finish(self) -> None:
        self._file.close()
        rel = shard_path(self.split, len(self.done))
        os.replace(self._tmp, resolve_under(str(self.out), rel))
        self.done.append((rel, self._count))
        self._file = None

    def close(self) -> list[tuple[str, int]]:
        """The split's (path, tokens) shards, the last one written (a split may have none)."""
        if self._file is not None:
            self._finish()
        return self.done


def _grouped(documents: Iterable[str]) -> Iterator[list[str]]:
    it = iter(documents)
    while group := list(islice(it, DOCS_PER_GROUP)):
        yield group


def write_shards(documents: Iterable[str], tokenizer: token_sources.Tokenizer, out: Path, *, shard_tokens: int,
                 val_every: int, max_tokens: int | None = None) -> dict[str, Any]:
    """Tokenizes ``documents`` into ``out/train`` and ``out/val``; returns the splits' shards and document counts."""
    import numpy as np

    dtype = dtype_for(tokenizer.vocab_size)
    writers = {s: ShardWriter(out, s, dtype=dtype, shard_tokens=shard_tokens) for s in SPLITS}
    counts, total, n = {s: 0 for s in SPLITS}, 0, 0
    head = np.array([] if tokenizer.bos is None else [tokenizer.bos], dtype=np.int64)
    tail = np.array([tokenizer.eot], dtype=np.int64)
    for group in _grouped(documents):
        for ids in tokenizer.encode(group):
            split = "val" if n % val_every == val_every - 1 else "train"
            doc = np.concatenate([head, ids.astype(np.int64), tail])
            writers[split].add(doc)
            counts[split] += 1
            total, n = total + len(doc), n + 1
            if max_tokens is not None and total >= max_tokens:
                break
        if max_tokens is not None and total >= max_tokens:
            break
    return {"splits": {s: w.close() for s, w in writers.items()}, "documents": counts}


def _inputs(ds: Dataset, source: str | None) -> tuple[token_sources.Tokenizer, list[Path], list[list[Any]]]:
    """(tokenizer, input files, their fingerprint) of ``ds``: the shipped text (its path and sha256), or
    ``--from``'s corpus (each file's path, size and modification time)."""
    spec = ds.tokens
    if spec.shipped:
        if source:
            raise DataError(f"--from {source!r}: {ds.name} is made from the text shipped with eksbench "
                            f"({spec.shipped}); it takes no source")
        path = REPO_ROOT / spec.shipped
        digest = token_sources.sha256_of(path) if path.is_file() else "missing"
        if digest != spec.shipped_sha256:
            raise DataError(f"{path}: sha256 {digest[:16]}..., not the shipped text's {spec.shipped_sha256[:16]}...; "
                            f"restore it (git checkout -- {spec.shipped})")
        return token_sources.byte_tokenizer(), [path], [[spec.shipped, digest]]
    if not source:
        raise DataError(f"{ds.name}: --from DIR is required: {ds.user_supplied}")
    folder = Path(source)
    if not folder.is_dir():
        raise DataError(f"--from {source!r}: not a directory; {ds.name} needs {ds.user_supplied}")
    tokenizer = token_sources.llama3_tokenizer(token_sources.find_tokenizer_file(folder))
    files = token_sources.corpus_files(folder)
    return tokenizer, files, [[p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns]
                              for p in files]


def _reusable(out: Path, made_by: dict) -> dict | None:
    """What an earlier, complete run with the same inputs wrote to ``out``, if every shard is still there."""
    try:
        done = json.loads((out / COMPLETE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(done, dict) or done.get("made_by") != made_by:
        return None
    itemsize = DTYPES[dtype_for(made_by["vocab_size"])]
    for shards in done.get("splits", {}).values():
        for rel, tokens in shards:
            try:
                if os.stat(resolve_under(str(out), rel), follow_symlinks=False).st_size != tokens * itemsize:
                    return None
            except (OSError, ValueError):
                return None
    return done


def plan_tokens(ds: Dataset, *, source: str | None, work: Path, spec: TokenSpec | None,
                log: Callable[[str], None]) -> tuple[dict[str, Path], dict]:
    """The shard files of ``ds`` (tokenized into ``work/tokens``, or reused from there) and the manifest's
    params holding their token section."""
    spec = spec or TokenSpec()
    made = ds.tokens
    shard_tokens = spec.shard_tokens or made.shard_tokens
    if shard_tokens < 1 or (spec.max_tokens is not None and spec.max_tokens < 1):
        raise DataError(f"--shard-tokens {shard_tokens} / --max-tokens {spec.max_tokens}: both must be >= 1, "
                        "e.g. --max-tokens 1000000000")
    tokenizer, files, fingerprint = _inputs(ds, source)
    if tokenizer.name == token_sources.LLAMA3 and tokenizer.vocab_size != LLAMA3_VOCAB:
        log(f"warning: the tokenizer file has {tokenizer.vocab_size - token_sources.LLAMA3_SPECIALS} ranks, not Llama "
            f"3's {token_sources.LLAMA3_RANKS}: this dataset's vocab_size is {tokenizer.vocab_size}")
    made_by = {"dataset": ds.name, "tokenizer": tokenizer.name, "tokenizer_sha256": tokenizer.file_sha256,
               "vocab_size": tokenizer.vocab_size, "inputs": fingerprint, "shard_tokens": shard_tokens,
               "val_every": made.val_every, "max_tokens": spec.max_tokens}
    out = work / "tokens"
    done = _reusable(out, made_by)
    if done is None:
        if out.exists():
            shutil.rmtree(out)  # refuses a symbolic link: never deletes outside the work folder
        out.mkdir(parents=True)
        log(f"tokenizing {len(files)} files with the {tokenizer.name} tokenizer into {out}")
        documents = token_sources.corpus_documents(files) if source else token_sources.shipped_documents(files[0])
        done = {"made_by": made_by, **write_shards(documents, tokenizer, out, shard_tokens=shard_tokens,
                                                   val_every=made.val_every, max_tokens=spec.max_tokens)}
        (out / COMPLETE).write_text(json.dumps(done, sort_keys=True))
    else:
        log(f"reusing the shards in {out} (same inputs, tokenizer and settings)")
    plan = {rel: out / rel for shards in done["splits"].values() for rel, _ in shards}
    section = token_section(tokenizer=tokenizer.name, vocab_size=tokenizer.vocab_size, eot=tokenizer.eot,
                            bos=tokenizer.bos, splits={s: [tuple(x) for x in v] for s, v in done["splits"].items()},
                            documents=done["documents"], val_rule=f"document i is held out when i % "
                            f"{made.val_every} == {made.val_every - 1}", made_from=[f[:2] for f in fingerprint],
                            tokenizer_sha256=tokenizer.file_sha256, max_tokens=spec.max_tokens)
    return plan, {PARAMS_KEY: section}
