"""Pre-tokenized datasets: the shipped text, ``text-bytes`` prepared end to end, the shard writer's bounds and the
Llama 3 tokenizer's path with a stand-in tokenizer file (where tiktoken is installed)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from core.catalog.llm import BYTE_VOCAB, LLAMA3_VOCAB
from core.contract.token_shards import MANIFEST_FILE, dtype_for, token_layout
from datasets import stage, token_shards, token_sources
from datasets.catalog import TOKEN_SHARDS, dataset
from datasets.errors import DataError
from datasets.file_checks import MANIFEST_NAME
from datasets.prepare import prepare, verify
from datasets.store import S3Store, open_store
from tests.datasets.conftest import BUCKET

ROOT = Path(__file__).resolve().parents[2]
WHEN = "2026-12-07T00:00:00+00:00"


def prepare_to(dest: Path, name: str, **kw):
    """What ``eksbench data prepare NAME --to DEST`` calls."""
    return prepare(dataset(name), open_store(str(dest)), work=kw.pop("work", dest.parent / "work"),
                   created_by="tests", created_at=WHEN, log=lambda m: None, **{"source": None, **kw})


def decoded(root: Path, split: str) -> list[bytes]:
    """A byte-tokenized split's documents, from its shards read back."""
    layout = token_layout(json.loads((root / MANIFEST_FILE).read_text()), "manifest")
    ids = np.concatenate([np.fromfile(root / s.path, dtype=layout.dtype) for s in layout.shards(split)])
    return [bytes(d[:-1].astype(np.uint8)) for d in np.split(ids, np.flatnonzero(ids == layout.eot) + 1)[:-1]]


def test_the_shipped_text_is_what_its_source_note_says():
    spec = dataset("text-bytes").tokens
    path = ROOT / spec.shipped
    data = path.read_bytes()
    assert 200_000 <= len(data) <= 400_000 and hashlib.sha256(data).hexdigest() == spec.shipped_sha256
    note = (path.parent / "SOURCE.md").read_text()
    assert spec.shipped_sha256 in note and f"{len(data):,} bytes" in note and "PSF" in note
    assert (path.parent / "LICENSE-PSF.txt").read_text().count("PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2") == 1
    documents = list(token_sources.shipped_documents(path))
    assert len(documents) == 742 and data.decode() == token_sources.DOCUMENT_SEPARATOR.join(documents)
    assert documents[0].startswith("argparse\n\nCommand-line parsing library")


def test_the_catalog_names_the_token_datasets_and_one_manifest_name():
    assert dataset("text-bytes").layout == dataset("fineweb-edu-10bt-sample").layout == TOKEN_SHARDS
    assert dataset("fineweb-edu-10bt-sample").user_supplied and dataset("text-bytes").needs_staging
    assert MANIFEST_FILE == MANIFEST_NAME  # the trainer reads the manifest the staging Job writes
    assert dtype_for(BYTE_VOCAB) == "uint16" and dtype_for(LLAMA3_VOCAB) == "uint32" and dtype_for(65_536) == "uint16"


def test_text_bytes_prepares_end_to_end_and_reads_back_as_the_shipped_text(tmp_path):
    dest = tmp_path / "text-bytes"
    result = prepare_to(dest, "text-bytes")
    layout = token_layout(result.manifest, "manifest")
    assert (layout.tokenizer, layout.vocab_size, layout.dtype, layout.eot, layout.bos) == ("bytes", 257, "uint16",
                                                                                           256, None)
    assert [s.path for s in layout.shards("train")] == [f"train/shard_0000{i}.bin" for i in range(3)]
    assert [s.tokens for s in layout.shards("train")][:2] == [131_072, 131_072]
    documents = [d.encode() for d in token_sources.shipped_documents(ROOT / dataset("text-bytes").tokens.shipped)]
    assert decoded(dest, "val") == documents[19::20] and len(decoded(dest, "val")) == 37
    assert decoded(dest, "train") == [d for i, d in enumerate(documents) if i % 20 != 19]
    assert verify(open_store(str(dest))).problems == []
    again = prepare_to(dest, "text-bytes")  # the same shards, reused from the work folder: nothing to copy
    assert (again.uploaded, again.manifest_written) == (0, False)


@pytest.mark.local_run
def test_text_bytes_goes_to_s3_and_stages_like_any_dataset(s3, tmp_path):
    prefix = "datasets/text-bytes/"
    made = prepare(dataset("text-bytes"), S3Store(BUCKET, prefix, client=s3), source=None, work=tmp_path / "w",
                   created_by="tests", created_at=WHEN, log=lambda m: None).manifest
    dest = tmp_path / "efs" / "datasets" / "text-bytes"
    stage.stage_copy(s3, f"s3://{BUCKET}/{prefix}", str(dest), log=lambda m: None)
    staged = json.loads((dest / MANIFEST_FILE).read_text())
    assert staged == made and token_layout(staged, "staged").shards("val")[0].tokens == 12_654
    assert decoded(dest, "val")[0].startswith(b"calendar.Calendar.itermonthdays4\n")


def test_shards_are_bounded_renamed_whole_and_stop_at_max_tokens(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    docs = [f"document {i} " * (i + 1) for i in range(40)]
    made = token_shards.write_shards(docs, token_sources.byte_tokenizer(), out, shard_tokens=100, val_every=4)
    sizes = [n for _, n in made["splits"]["train"]]
    assert sizes[:-1] == [100] * (len(sizes) - 1) and 0 < sizes[-1] <= 100 and made["documents"] == {"train": 30,
                                                                                                     "val": 10}
    assert sum(sizes) == sum(len(d) + 1 for i, d in enumerate(docs) if i % 4 != 3)
    assert not list(out.rglob("*.part")) and all((out / p).stat().st_size == 2 * n for p, n in made["splits"]["val"])
    capped = token_shards.write_shards(docs, token_sources.byte_tokenizer(), tmp_path / "capped", shard_tokens=100,
                                       val_every=4, max_tokens=500)
    total = sum(n for split in capped["splits"].values() for _, n in split)
    assert 500 <= total < 500 + len(docs[-1]) and sum(capped["documents"].values()) < 40


def test_text_bytes_refuses_a_source_and_a_changed_text(tmp_path, monkeypatch):
    with pytest.raises(DataError, match=r"^--from '/x': text-bytes is made from the text shipped with eksbench"):
        prepare_to(tmp_path / "o", "text-bytes", source="/x")
    (tmp_path / "datasets" / "text").mkdir(parents=True)
    (tmp_path / dataset("text-bytes").tokens.shipped).write_text("edited\n")
    monkeypatch.setattr(token_shards, "REPO_ROOT", tmp_path)
    with pytest.raises(DataError, match=r"stdlib-docstrings.txt: sha256 [0-9a-f]{16}\.\.\., not the shipped text's "
                                        r"d2b9ba4c50df5043\.\.\.; restore it \(git checkout -- datasets/text/"):
        prepare_to(tmp_path / "o", "text-bytes")


def test_fineweb_needs_a_folder_with_its_corpus_and_tokenizer(tmp_path):
    with pytest.raises(DataError, match=r"^fineweb-edu-10bt-sample: --from DIR is required: .*sample/10BT"):
        prepare_to(tmp_path / "o", "fineweb-edu-10bt-sample")
    with pytest.raises(DataError, match=r"no tokenizer.model in it or in its original/ folder; copy Llama 3's"):
        prepare_to(tmp_path / "o", "fineweb-edu-10bt-sample", source=str(tmp_path))
    (tmp_path / "tokenizer.model").write_text("IQ== 0\nnot base64!\n")
    with pytest.raises(DataError, match=r"tokenizer.model:2: b'not base64!\\n' is not '<base64 token> <rank>'"):
        token_sources.read_bpe_ranks(tmp_path / "tokenizer.model")
    (tmp_path / "a.jsonl").write_text('{"text": "fine"}\n["no text"]\n')
    with pytest.raises(DataError, match=r"a.jsonl:2: not a JSON object with a 'text' string"):
        list(token_sources.corpus_documents(token_sources.corpus_files(tmp_path)))


def test_long_runs_are_cut_as_meta_cuts_them(monkeypatch):
    monkeypatch.setattr(token_sources, "MAX_RUN_CHARS", 4)
    text = "ab cdefghij   \n\n\n   k" + "x" * 9
    cut = token_sources.pieces(text)
    assert "".join(cut) == text and cut == ["ab cdef", "ghij   \n", "\n\n  ", " kxxx", "xxxx", "xx"]
    assert token_sources.pieces("") == [""] and token_sources.pieces("a b") == ["a b"]


def stand_in_tokenizer(folder: Path) -> list[bytes]:
    """A tiktoken BPE file like Llama 3's, small: the 256 bytes then a few merges."""
    tokens = [bytes([i]) for i in range(256)] + [b"th", b"he", b"the", b" t", b" the", b"in", b"ing"]
    (folder / "original").mkdir(parents=True)
    (folder / "original" / "tokenizer.model").write_bytes(
        b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in enumerate(tokens)))
    return tokens


def test_the_llama3_path_tokenizes_a_corpus_with_bos_and_eot(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    source = tmp_path / "corpus"
    tokens = stand_in_tokenizer(source)
    docs = [f"the thing {i} in the {'rain ' * (i % 5)}<|end_of_text|>" for i in range(45)]
    (source / "sample" / "10BT").mkdir(parents=True)
    (source / "sample" / "10BT" / "000_00000.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    result = prepare_to(tmp_path / "out", "fineweb-edu-10bt-sample", source=str(source),
                        tokens=token_shards.TokenSpec(shard_tokens=64))
    layout = token_layout(result.manifest, "manifest")
    n = len(tokens)
    assert (layout.tokenizer, layout.vocab_size, layout.dtype, layout.bos, layout.eot) == ("llama3", n + 256,
                                                                                           "uint16", n, n + 1)
    assert result.manifest["params"]["tokens"]["tokenizer_sha256"] == hashlib.sha256(
        (source / "original" / "tokenizer.model").read_bytes()).hexdigest()
    ids = np.concatenate([np.fromfile(tmp_path / "out" / s.path, dtype="uint16") for s in layout.shards("train")])
    first = ids[:int(np.flatnonzero(ids == n + 1)[0]) + 1].tolist()
    assert first[0] == n and first[-1] == n + 1 and n + 1 not in first[1:-1]  # the text's "<|end_of_text|>" is text
    enc = tiktoken.Encoding("check", pat_str=token_sources.LLAMA3_PATTERN,
                            mergeable_ranks={t: r for r, t in enumerate(tokens)}, special_tokens={})
    assert enc.decode(first[1:-1]) == docs[0] and tokens.index(b" the") in first
    assert [s.tokens for s in layout.shards("val")][0] == 64  # shards of 64 tokens, as asked
    assert result.manifest["params"]["tokens"]["documents"] == {"train": 43, "val": 2}


def test_the_llama3_path_reads_parquet(tmp_path):
    pytest.importorskip("tiktoken")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    stand_in_tokenizer(tmp_path)
    pq.write_table(pa.table({"text": ["one", None, "two", "three"], "id": [1, 2, 3, 4]}), tmp_path / "0.parquet",
                   row_group_size=2)
    assert list(token_sources.corpus_documents(token_sources.corpus_files(tmp_path))) == ["one", "two", "three"]
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "1.parquet")
    with pytest.raises(DataError, match=r"1.parquet: no 'text' column \(columns: body\)"):
        list(token_sources.corpus_documents(token_sources.corpus_files(tmp_path)))
