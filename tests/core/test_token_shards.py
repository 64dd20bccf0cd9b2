"""The pre-tokenized format's one check (``core.contract.token_shards.token_layout``): what the writer makes reads
back, and each bad key is named with its value and the rule."""

from __future__ import annotations

import copy

import pytest

from core.contract.token_shards import PARAMS_KEY, Shard, path_problem, shard_path, token_layout, token_section

SHA = "ab" * 32


def manifest(vocab: int = 257) -> dict:
    section = token_section(tokenizer="bytes", vocab_size=vocab, eot=vocab - 1, bos=None,
                            splits={"train": [(shard_path("train", 0), 10), (shard_path("train", 1), 4)],
                                    "val": [(shard_path("val", 0), 3)]}, documents={"train": 2, "val": 1})
    files = [{"path": p, "size": n * 2, "sha256": SHA} for p, n in
             (("train/shard_00000.bin", 10), ("train/shard_00001.bin", 4), ("val/shard_00000.bin", 3))]
    return {"files": files, "layout": "token-shards", "params": {PARAMS_KEY: section}}


def test_what_the_writer_makes_reads_back():
    layout = token_layout(manifest(), "m.json")
    assert (layout.tokenizer, layout.vocab_size, layout.dtype, layout.itemsize, layout.eot) == ("bytes", 257,
                                                                                                "uint16", 2, 256)
    assert layout.shards("train") == (Shard("train/shard_00000.bin", 10, SHA), Shard("train/shard_00001.bin", 4, SHA))
    assert layout.shards("val")[0].tokens == 3 and manifest()["params"]["tokens"]["documents"]["val"] == 1


@pytest.mark.hostile
@pytest.mark.parametrize("key, value, says", [
    ("format", 2, "params.tokens.format is 2; this reader knows format 1"),
    ("dtype", "int8", "params.tokens.dtype is 'int8'; must be one of uint16, uint32"),
    ("vocab_size", 70_000, "params.tokens.vocab_size is 70000; must be an integer from 2 to 65536 (what uint16 holds)"),
    ("vocab_size", True, "params.tokens.vocab_size is True"),
    ("eot", 257, "params.tokens.eot is 257; must be a token id below vocab_size 257"),
    ("bos", -1, "params.tokens.bos is -1; must be null or a token id below vocab_size 257"),
    ("tokenizer", "", "params.tokens.tokenizer is ''; must name the tokenizer"),
    ("splits", {"train": []}, "params.tokens.splits is {'train': []}; must hold 'train' and 'val'"),
    ("splits", {"train": [], "val": [], "test": []}, "params.tokens.splits has 'test'; the splits are train, val"),
])
def test_a_bad_header_is_named(key, value, says):
    m = manifest()
    m["params"][PARAMS_KEY][key] = value
    with pytest.raises(ValueError, match="^m.json: ") as e:
        token_layout(m, "m.json")
    assert says in str(e.value)


@pytest.mark.hostile
def test_a_shard_must_be_a_listed_file_of_its_size_inside_its_split():
    m = copy.deepcopy(manifest())
    m["params"][PARAMS_KEY]["splits"]["val"][0]["path"] = "val/other.bin"
    with pytest.raises(ValueError, match=r"splits.val\[0\].path 'val/other.bin' is not in the manifest's file list$"):
        token_layout(m, "m.json")
    m = manifest()
    m["params"][PARAMS_KEY]["splits"]["train"][1]["tokens"] = -1
    with pytest.raises(ValueError, match=r"splits.train\[1\].tokens is -1; must be a token count"):
        token_layout(m, "m.json")
    assert path_problem("train/a/b.bin", "train") == ""
    assert "absolute" in path_problem("/train/x", "train") and "control" in path_problem("train/\0", "train")
    assert "inside the split's folder" in path_problem("train", "train")
    with pytest.raises(ValueError, match="has no params.tokens section"):
        token_layout({"files": [], "params": {}}, "m.json")
