"""What a pre-tokenized dataset is made from: its documents (the shipped text, parquet or JSON lines files) and
its tokenizer (bytes, or Llama 3's tiktoken BPE file).

Documents are streamed: a parquet file a batch of rows at a time (pyarrow), a JSON lines file a line at a time,
so memory stays bounded whatever the corpus' size. The Llama 3 tokenizer is Meta's: the BPE ranks of its
``tokenizer.model`` (one ``<base64 bytes> <rank>`` per line, 128,000 of them), Meta's split pattern and 256
special tokens after the ranks (``<|begin_of_text|>`` = 128000 starts a document, ``<|end_of_text|>`` = 128001
ends it), 128,256 ids in all (meta-llama/llama3 ``llama/tokenizer.py``); encoded with ``tiktoken``. Like
Meta's ``encode``, a long text is cut into pieces of at most 400,000 characters and runs of at most 25,000
whitespace or non-whitespace characters before encoding (tiktoken's regex is slow, or overflows, on longer
runs). tiktoken, pyarrow and numpy are imported inside the functions.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from core.catalog.llm import BYTE_VOCAB
from datasets.errors import DataError

BYTES, LLAMA3 = "bytes", "llama3"
TOKENIZERS = (BYTES, LLAMA3)
TOKENIZER_FILE = "tokenizer.model"  # meta-llama/Meta-Llama-3-8B's original/tokenizer.model
LLAMA3_RANKS = 128_000
LLAMA3_SPECIALS = 256
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
MAX_ENCODE_CHARS = 400_000  # Meta's TIKTOKEN_MAX_ENCODE_CHARS
MAX_RUN_CHARS = 25_000  # Meta's MAX_NO_WHITESPACES_CHARS
RUNS = re.compile(r"\s+|\S+")  # \s is str.isspace()
DOCUMENT_SEPARATOR = "\f\n"  # a line holding a form feed ends a document of the shipped text
CORPUS_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz")
PARQUET_ROWS = 1024  # rows read from a parquet file at once
PIP_PINS = {"tiktoken": "tiktoken==0.14.0", "pyarrow": "pyarrow==26.0.1"}


@dataclass(frozen=True)
class Tokenizer:
    """A tokenizer as the shard writer uses it: ``encode`` maps texts to arrays of ids (no bos or eot added)."""
    name: str
    vocab_size: int
    eot: int
    bos: int | None
    encode: Callable[[list[str]], list[Any]]
    file_sha256: str | None = None  # the tokenizer file's, recorded in the manifest


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _encode_bytes(texts: list[str]) -> list[Any]:
    import numpy as np

    return [np.frombuffer(t.encode("utf-8"), dtype=np.uint8).astype(np.uint16) for t in texts]


def byte_tokenizer() -> Tokenizer:
    """UTF-8 bytes as ids 0-255 and end-of-text 256 (``core.catalog.llm.BYTE_VOCAB`` ids)."""
    return Tokenizer(BYTES, BYTE_VOCAB, eot=BYTE_VOCAB - 1, bos=None, encode=_encode_bytes)


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise DataError(f"this dataset needs the Python package {module.split('.')[0]!r}: "
                        f"pip install {PIP_PINS[module.split('.')[0]]}") from None


def read_bpe_ranks(path: Path) -> dict[bytes, int]:
    """The ``<base64 token> <rank>`` lines of a tiktoken BPE file; DataError naming the file and line."""
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.split()
            try:
                token, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
                if len(parts) != 2 or rank < 0:
                    raise ValueError
            except (ValueError, IndexError, binascii.Error):
                raise DataError(f"{path}:{n}: {line[:60]!r} is not '<base64 token> <rank>'; is it Llama 3's "
                                f"original/{TOKENIZER_FILE}?") from None
            ranks[token] = rank
    if sorted(ranks.values()) != list(range(len(ranks))) or len(ranks) < 256:
        raise DataError(f"{path}: its {len(ranks)} ranks are not 0..{len(ranks) - 1} over at least the 256 bytes; "
                        f"is it Llama 3's original/{TOKENIZER_FILE}?")
    return ranks


def pieces(text: str) -> list[str]:
    """``text`` cut as Meta's ``encode`` cuts it: chunks of ``MAX_ENCODE_CHARS``, then runs of at most
    ``MAX_RUN_CHARS`` characters that are all whitespace or all not (looked at only in a chunk long enough to
    hold such a run: most documents are shorter)."""
    out = []
    for lo in range(0, len(text), MAX_ENCODE_CHARS):
        chunk = text[lo:lo + MAX_ENCODE_CHARS]
        out.extend(_runs(chunk) if len(chunk) > MAX_RUN_CHARS else [chunk])
    return out or [""]


def _runs(chunk: str) -> list[str]:
    """Meta's ``_split_whitespaces_or_nonwhitespaces``: a cut every ``MAX_RUN_CHARS`` characters into a run of
    whitespace or of non-whitespace, in one pass over the runs."""
    cuts = [c for m in RUNS.finditer(chunk) if m.end() - m.start() > MAX_RUN_CHARS
            for c in range(m.start() + MAX_RUN_CHARS, m.end(), MAX_RUN_CHARS)]
    bounds = [0, *cuts, len(chunk)]
    return [chunk[a:b] for a, b in zip(bounds, bounds[1:])]


def llama3_tokenizer(path: Path, *, threads: int = 0) -> Tokenizer:
    """Llama 3's tokenizer from its BPE file at ``path`` (``tiktoken``): the ranks, then 256 special ids."""
    import numpy as np

    tiktoken = _need("tiktoken")
    ranks = read_bpe_ranks(path)
    n = len(ranks)
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
             "<|reserved_special_token_1|>", "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
             "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>"]
    names += [f"<|reserved_special_token_{i}|>" for i in range(5, LLAMA3_SPECIALS - 5)]
    enc = tiktoken.Encoding(name=f"llama3-{path.name}", pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks,
                            special_tokens={name: n + i for i, name in enumerate(names)})
    workers = threads or os.cpu_count() or 1

    def encode(texts: list[str]) -> list[Any]:
        cut = [pieces(t) for t in texts]
        flat = enc.encode_ordinary_batch([p for ps in cut for p in ps], num_threads=workers)
        out, at = [], 0
        for ps in cut:
            out.append(np.concatenate([np.asarray(ids, dtype=np.uint32) for ids in flat[at:at + len(ps)]]))
            at += len(ps)
        return out
    return Tokenizer(LLAMA3, n + LLAMA3_SPECIALS, eot=n + 1, bos=n, encode=encode, file_sha256=sha256_of(path))


def shipped_documents(path: Path) -> Iterator[str]:
    """The documents of a shipped text: lines up to a form feed line, the file read a line at a time."""
    lines: list[str] = []
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            if line == DOCUMENT_SEPARATOR:
                yield "".join(lines)
                lines = []
            else:
                lines.append(line)
    if lines:
        yield "".join(lines)


def jsonl_documents(path: Path) -> Iterator[str]:
    """The ``text`` of each line of a JSON lines file (gzip-compressed when it ends in .gz)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                text = json.loads(line).get("text")
            except (ValueError, AttributeError):
                text = None
            if not isinstance(text, str):
                raise DataError(f"{path}:{n}: not a JSON object with a 'text' string, e.g. {{\"text\": \"...\"}}")
            yield text


def parquet_documents(path: Path) -> Iterator[str]:
    """The ``text`` column of a parquet file, ``PARQUET_ROWS`` rows at a time (null rows skipped)."""
    pq = _need("pyarrow.parquet")
    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises ArrowInvalid, OSError, ...: one line naming the file
        raise DataError(f"{path}: not a readable parquet file ({str(e)[:120]})") from None
    if "text" not in pf.schema_arrow.names:
        raise DataError(f"{path}: no 'text' column (columns: {', '.join(pf.schema_arrow.names)[:200]})")
    for batch in pf.iter_batches(batch_size=PARQUET_ROWS, columns=["text"]):
        yield from (t for t in batch.column(0).to_pylist() if t is not None)


def corpus_files(folder: Path) -> list[Path]:
    """The corpus files under ``folder`` (``CORPUS_SUFFIXES``), in path order; DataError when there are none."""
    found = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(CORPUS_SUFFIXES))
    if not found:
        raise DataError(f"--from {str(folder)!r}: holds no {', '.join(CORPUS_SUFFIXES)} files; pass the folder "
                        "holding the corpus' files (e.g. fineweb-edu's sample/10BT/*.parquet) and the "
                        f"tokenizer's {TOKENIZER_FILE}")
    return found


def corpus_documents(files: list[Path]) -> Iterator[str]:
    """Every document of ``files``, one file after the other."""
    for path in files:
        yield from (parquet_documents(path) if path.name.endswith(".parquet") else jsonl_documents(path))


def find_tokenizer_file(folder: Path) -> Path:
    """``folder/tokenizer.model``, or ``folder/original/tokenizer.model`` (the Hugging Face repository's layout)."""
    for candidate in (folder / TOKENIZER_FILE, folder / "original" / TOKENIZER_FILE):
        if candidate.is_file():
            return candidate
    raise DataError(f"--from {str(folder)!r}: no {TOKENIZER_FILE} in it or in its original/ folder; copy Llama 3's "
                    f"original/{TOKENIZER_FILE} (meta-llama/Meta-Llama-3-8B, after accepting Meta's licence) there")
