"""Pre-tokenized text on disk: the format ``eksbench data prepare`` writes and the trainer reads.

A token dataset is a folder with one sub-folder per split (``train/``, ``val/``) of shards, each a flat array of
token ids in native (little-endian) byte order, ``uint16`` when the vocabulary fits and ``uint32`` otherwise, and
the dataset's ``manifest.json`` (``datasets.file_manifest``, the one the upload, ``eksbench data verify`` and the
staging Job check every file's size and sha256 against). Its ``params`` hold the token section, under
``PARAMS_KEY``::

    "tokens": {"format": 1, "tokenizer": "bytes", "vocab_size": 257, "dtype": "uint16", "eot": 256, "bos": null,
               "splits": {"train": [{"path": "train/shard_00000.bin", "tokens": 131072}, ...], "val": [...]}, ...}

Documents follow one another in a shard, each ended by the ``eot`` id (and started by ``bos`` where the tokenizer
has one). The writer (``datasets.token_shards``) and the reader (``workloads.train.common.tokens``) are siblings
that may not import each other, so the names and the one check of the section (``token_layout``) live here;
standard library only (the pods ship ``core/``).
"""

from __future__ import annotations

from dataclasses import dataclass

PARAMS_KEY = "tokens"  # the token section's key in the manifest's params
FORMAT = 1
MANIFEST_FILE = "manifest.json"  # the dataset's manifest, at its root (datasets.file_checks.MANIFEST_NAME)
MAX_MANIFEST_BYTES = 16 * 1024 * 1024  # a reader refuses a larger manifest.json (10B tokens in 100M shards: ~30 kB)
DTYPES = {"uint16": 2, "uint32": 4}  # token dtype -> bytes per token
SPLITS = ("train", "val")
SHARD_SUFFIX = ".bin"
SHOWN = 120  # a hostile value is quoted cut to about this many characters


def dtype_for(vocab_size: int) -> str:
    """The smallest dtype holding every id of a vocabulary of ``vocab_size``."""
    return "uint16" if vocab_size <= 2**16 else "uint32"


def shard_path(split: str, index: int) -> str:
    """The relative path of a split's ``index``-th shard, e.g. ``train/shard_00003.bin``."""
    return f"{split}/shard_{index:05d}{SHARD_SUFFIX}"


@dataclass(frozen=True)
class Shard:
    path: str  # relative to the dataset's root, "/"-separated
    tokens: int
    sha256: str  # from the manifest's file list


@dataclass(frozen=True)
class TokenLayout:
    """The token section of one dataset's manifest, checked."""
    tokenizer: str
    vocab_size: int
    dtype: str
    eot: int
    bos: int | None
    splits: tuple[tuple[str, tuple[Shard, ...]], ...]

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype]

    def shards(self, split: str) -> tuple[Shard, ...]:
        return dict(self.splits).get(split, ())


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text) - SHOWN} more characters)"


def _is_int(value: object, lo: int, hi: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def path_problem(path: object, split: str) -> str:
    """'' when ``path`` is a relative, "/"-separated path inside ``split``'s folder; else why not."""
    if not isinstance(path, str) or not path:
        return f"{_short(path)} is not a relative path"
    if path.startswith("/"):
        return f"{_short(path)} is absolute"
    if "\\" in path or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return f"{_short(path)} holds a backslash or a control character"
    parts = path.split("/")
    if "" in parts or "." in parts or ".." in parts:
        return f"{_short(path)} has an empty, '.' or '..' component"
    if parts[0] != split or len(parts) < 2:
        return f"{_short(path)} is not inside the split's folder {split + '/'!r}"
    return ""


def _header(section: dict, where: str) -> tuple[str, int, str, int, int | None]:
    """(tokenizer, vocab_size, dtype, eot, bos) of the section; ValueError naming the key otherwise."""
    key = f"{where}: params.{PARAMS_KEY}"
    if section.get("format") != FORMAT:
        raise ValueError(f"{key}.format is {_short(section.get('format'))}; this reader knows format {FORMAT}")
    tokenizer, vocab, dtype = section.get("tokenizer"), section.get("vocab_size"), section.get("dtype")
    if not isinstance(tokenizer, str) or not tokenizer:
        raise ValueError(f"{key}.tokenizer is {_short(tokenizer)}; must name the tokenizer, e.g. 'bytes'")
    if dtype not in DTYPES:
        raise ValueError(f"{key}.dtype is {_short(dtype)}; must be one of {', '.join(DTYPES)}")
    if not _is_int(vocab, 2, 2 ** (8 * DTYPES[dtype])):
        raise ValueError(f"{key}.vocab_size is {_short(vocab)}; must be an integer from 2 to "
                         f"{2 ** (8 * DTYPES[dtype])} (what {dtype} holds)")
    eot, bos = section.get("eot"), section.get("bos")
    if not _is_int(eot, 0, vocab - 1):
        raise ValueError(f"{key}.eot is {_short(eot)}; must be a token id below vocab_size {vocab}")
    if bos is not None and not _is_int(bos, 0, vocab - 1):
        raise ValueError(f"{key}.bos is {_short(bos)}; must be null or a token id below vocab_size {vocab}")
    return tokenizer, vocab, dtype, eot, bos


def _split_shards(split: str, entries: object, files: dict[str, dict], itemsize: int,
                  where: str) -> tuple[Shard, ...]:
    """One split's shards, each a listed file whose size is its token count x ``itemsize``."""
    key = f"{where}: params.{PARAMS_KEY}.splits.{split}"
    if not isinstance(entries, list):
        raise ValueError(f"{key} is {_short(entries)}; must be a list of {{'path', 'tokens'}}")
    shards = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"{key}[{i}] is {_short(e)}; must be an object {{'path', 'tokens'}}")
        path, tokens = e.get("path"), e.get("tokens")
        problem = path_problem(path, split)
        if problem:
            raise ValueError(f"{key}[{i}].path: {problem}; shard paths stay inside the dataset's folder")
        if not _is_int(tokens, 0, 2**62):
            raise ValueError(f"{key}[{i}].tokens is {_short(tokens)}; must be a token count (an integer >= 0)")
        listed = files.get(path)
        if listed is None:
            raise ValueError(f"{key}[{i}].path {path!r} is not in the manifest's file list")
        if listed.get("size") != tokens * itemsize:
            raise ValueError(f"{key}[{i}]: {path!r} is listed with {_short(listed.get('size'))} bytes, but "
                             f"{tokens} tokens x {itemsize} bytes make {tokens * itemsize}")
        shards.append(Shard(path, tokens, str(listed.get("sha256", ""))))
    return tuple(shards)


def token_layout(manifest: object, where: str) -> TokenLayout:
    """The checked token section of a parsed ``manifest.json`` (``where`` names it); ValueError naming the key,
    the value and the rule otherwise."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise ValueError(f"{where} is not an eksbench dataset manifest (no 'files' list)")
    params = manifest.get("params")
    section = params.get(PARAMS_KEY) if isinstance(params, dict) else None
    if not isinstance(section, dict):
        raise ValueError(f"{where} has no params.{PARAMS_KEY} section: it is not a pre-tokenized dataset "
                         f"(layout {_short(manifest.get('layout'))}); prepare one, e.g. `eksbench data prepare "
                         "text-bytes`")
    tokenizer, vocab, dtype, eot, bos = _header(section, where)
    files = {f.get("path"): f for f in manifest["files"] if isinstance(f, dict)}
    splits = section.get("splits")
    if not isinstance(splits, dict) or not all(s in splits for s in SPLITS):
        raise ValueError(f"{where}: params.{PARAMS_KEY}.splits is {_short(splits)}; must hold "
                         f"{' and '.join(repr(s) for s in SPLITS)}")
    unknown = sorted(set(splits) - set(SPLITS))
    if unknown:
        raise ValueError(f"{where}: params.{PARAMS_KEY}.splits has {_short(unknown[0])}; the splits are "
                         f"{', '.join(SPLITS)}")
    checked = tuple((s, _split_shards(s, splits[s], files, DTYPES[dtype], where)) for s in SPLITS)
    return TokenLayout(tokenizer, vocab, dtype, eot, bos, checked)


def token_section(*, tokenizer: str, vocab_size: int, eot: int, bos: int | None,
                  splits: dict[str, list[tuple[str, int]]], **extra: object) -> dict:
    """The token section a writer puts under ``params[PARAMS_KEY]``: ``splits`` maps each split to its
    (path, tokens) shards; ``extra`` records how it was made (documents, the source, the held-out rule)."""
    return {"format": FORMAT, "tokenizer": tokenizer, "vocab_size": vocab_size, "dtype": dtype_for(vocab_size),
            "eot": eot, "bos": bos, **extra,
            "splits": {s: [{"path": p, "tokens": n} for p, n in splits.get(s, [])] for s in SPLITS}}
