"""The language model's token sources: windows, positions across world sizes, the tensor-parallel rule, the
manifest's refusals, validation batches and synthetic tokens. The real ``text-bytes``, as ``eksbench data
prepare`` makes it, is read in tests/bench/local/test_text_bytes_data.py (datasets is not below workloads)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from core.contract.token_shards import DTYPES, PARAMS_KEY, SPLITS, dtype_for, shard_path, token_section
from workloads.train.common.data import Position, next_slice
from workloads.train.common.tokens import SyntheticTokens, TokenShards, read_manifest, validation_batches

CPU = torch.device("cpu")


def write_token_dataset(root: Path, splits: dict, *, vocab_size: int) -> Path:
    """``root/<split>/shard_*.bin`` (one array of ids per shard) and a ``manifest.json`` in the format
    ``eksbench data prepare`` writes: the file list and the token section of ``core.contract.token_shards``."""
    dtype, files, shards = dtype_for(vocab_size), [], {}
    for split in SPLITS:
        shards[split] = []
        for i, ids in enumerate(splits.get(split, [])):
            rel, data = shard_path(split, i), np.asarray(ids, dtype=dtype_for(vocab_size)).tobytes()
            (root / split).mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
            files.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
            shards[split].append((rel, len(data) // DTYPES[dtype]))
    section = token_section(tokenizer="bytes", vocab_size=vocab_size, eot=vocab_size - 1, bos=None, splits=shards)
    (root / "manifest.json").write_text(json.dumps({"format": 1, "dataset": root.name, "layout": "token-shards",
                                                    "files": files, "params": {PARAMS_KEY: section}}))
    return root


def dataset(tmp_path, train=(np.arange(0, 41), np.arange(100, 125)), val=(np.arange(200, 233),), vocab=257):
    """Shards whose ids say where they are: train shard 0 holds 0..40, shard 1 100..124; val 200..232."""
    return write_token_dataset(tmp_path / "ds", {"train": list(train), "val": list(val)}, vocab_size=vocab)


def source(root, **kw):
    args = dict(batch=2, seq_len=8, device=CPU, seed=3, vocab_size=257)
    return TokenShards(root, "train", **{**args, **kw})


def steps(src, pos, global_batch, n):
    """The windows (first ids) ``src`` reads in ``n`` steps from ``pos``, and the position after them."""
    out = []
    for _ in range(n):
        start, pos = next_slice(src.size, pos, global_batch)
        x, _ = src.batch(start)
        out.append(x[:, 0].tolist())
    return out, pos


def test_windows_are_seq_len_plus_one_tokens_of_one_shard_and_targets_are_shifted(tmp_path):
    src = source(dataset(tmp_path))
    assert src.size == 40 // 8 + 24 // 8 == 8  # (41 - 1) // 8 + (25 - 1) // 8: no window crosses a shard
    rows = src.windows.rows(list(range(8)))
    assert rows[:, 0].tolist() == [0, 8, 16, 24, 32, 100, 108, 116]
    assert all(np.array_equal(r, np.arange(r[0], r[0] + 9)) for r in rows)
    x, y = src.batch(Position(0, 0))
    assert x.dtype == torch.int64 and x.shape == (2, 8) and torch.equal(x[:, 1:], y[:, :-1])
    assert torch.equal(y[:, -1], x[:, -1] + 1)


def test_an_epoch_reads_every_window_once_across_the_ranks(tmp_path):
    root = dataset(tmp_path)
    ranks = [source(root, dp_rank=r) for r in range(2)]
    seen = []
    for start in (Position(0, 0), Position(0, 4)):
        seen += [w for s in ranks for w in s.batch(start)[0][:, 0].tolist()]
    assert sorted(seen) == [0, 8, 16, 24, 32, 100, 108, 116]
    assert seen != sorted(seen)  # the epoch's order is a permutation


def test_two_data_parallel_ranks_resumed_as_one_read_the_same_windows(tmp_path):
    root = dataset(tmp_path)
    two = [source(root, dp_rank=r) for r in range(2)]
    per_rank = [steps(s, Position(), 4, 5)[0] for s in two]  # 5 steps of 4 windows: into the second epoch
    together = [a + b for a, b in zip(*per_rank)]
    _, after_two = steps(two[0], Position(), 4, 2)
    one = source(root, batch=4)
    one.start(after_two, global_batch=4, rank=0, batch=4, seed=3)
    resumed, _ = steps(one, after_two, 4, 3)
    assert resumed == together[2:]
    assert after_two == Position(0, 8)  # the epoch's 8 windows read: the next step rolls into epoch 1
    assert together[2] != together[0]  # ... which has its own order


def test_ranks_of_one_tensor_parallel_group_get_identical_batches(tmp_path):
    """Global ranks 0-3 with tensor parallel 2: the trainer passes dp_rank = rank // 2 and the dp batch."""
    root = dataset(tmp_path)
    sources = []
    for rank in range(4):
        s = source(root, dp_rank=rank // 2)
        s.start(Position(), global_batch=4, rank=rank // 2, batch=2, seed=3)
        sources.append(s)
    for start in (Position(0, 0), Position(0, 4), Position(1, 0)):
        batches = [s.batch(start) for s in sources]
        assert torch.equal(batches[0][0], batches[1][0]) and torch.equal(batches[2][0], batches[3][0])
        assert torch.equal(batches[0][1], batches[1][1])
        assert not torch.equal(batches[0][0], batches[2][0])
    assert not hasattr(sources[0], "reseed")  # the checkpoint's reseed passes the global rank


def test_start_refuses_a_slice_outside_the_global_batch(tmp_path):
    src = source(dataset(tmp_path))
    with pytest.raises(ValueError, match=r"^data-parallel rank 2 with batch 2 does not fit a global batch of 4 "):
        src.start(Position(), global_batch=4, rank=2, batch=2, seed=3)


def manifest_of(root):
    return json.loads((root / "manifest.json").read_text())


def rewrite(root, change):
    m = manifest_of(root)
    change(m)
    (root / "manifest.json").write_text(json.dumps(m))


@pytest.mark.hostile
@pytest.mark.parametrize("path, says", [
    ("/etc/passwd", "is absolute"), ("train/../../x.bin", "has an empty, '.' or '..' component"),
    ("val/shard_00000.bin", "is not inside the split's folder 'train/'"), ("train//x.bin", "empty")])
def test_a_shard_path_leaving_its_split_is_refused(tmp_path, path, says):
    root = dataset(tmp_path)

    def change(m):
        m["params"]["tokens"]["splits"]["train"][0]["path"] = path
    rewrite(root, change)
    with pytest.raises(ValueError, match=r"manifest.json: params.tokens.splits.train\[0\].path: ") as e:
        source(root)
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.hostile
def test_a_symbolic_link_out_of_the_dataset_is_refused(tmp_path):
    root = dataset(tmp_path)
    outside = tmp_path / "outside.bin"
    outside.write_bytes((root / "train/shard_00001.bin").read_bytes())
    (root / "train/shard_00001.bin").unlink()
    (root / "train/shard_00001.bin").symlink_to(outside)
    with pytest.raises(ValueError, match=r"train/shard_00001.bin: leads outside the dataset's folder .*; refused$"):
        source(root)


@pytest.mark.hostile
def test_a_shard_of_the_wrong_size_is_refused(tmp_path):
    root = dataset(tmp_path)
    with open(root / "train/shard_00000.bin", "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError, match=r"train/shard_00000.bin: 83 bytes, but the manifest says 41 tokens of "
                                         r"uint16 \(82 bytes\); stage the dataset again$"):
        source(root)

    def lie(m):
        m["params"]["tokens"]["splits"]["train"][1]["tokens"] = 26
    rewrite(dataset(tmp_path / "b"), lie)
    with pytest.raises(ValueError, match=r"splits.train\[1\]: 'train/shard_00001.bin' is listed with 50 bytes, but "
                                         r"26 tokens x 2 bytes make 52$"):
        source(tmp_path / "b" / "ds")


@pytest.mark.hostile
def test_a_fifo_or_link_or_oversized_manifest_is_refused_without_blocking(tmp_path):
    root = dataset(tmp_path)
    (root / "manifest.json").unlink()
    os.mkfifo(root / "manifest.json")  # a reader that opened it would block until a writer came
    with pytest.raises(ValueError, match=r"manifest.json: not a regular file; a dataset's manifest must be one$"):
        source(root)
    (root / "manifest.json").unlink()
    (root / "manifest.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ValueError, match="not a regular file"):
        read_manifest(root)
    (root / "manifest.json").unlink()
    with open(root / "manifest.json", "wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)  # sparse: no 16 MiB written
    with pytest.raises(ValueError, match=r"manifest.json: 16777217 bytes; a manifest may hold at most 16777216 bytes$"):
        source(root)
    (root / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"manifest.json: not JSON in UTF-8 "):
        source(root)


@pytest.mark.hostile
def test_a_vocabulary_or_tokenizer_the_model_cannot_take_is_refused(tmp_path):
    root = dataset(tmp_path)
    with pytest.raises(ValueError, match=r"tokenizer 'bytes' has vocab_size 257, more ids than the model's vocabulary "
                                         r"\(256\); use a model with vocab_size >= 257"):
        source(root, vocab_size=256)
    assert source(root, vocab_size=2048).size == 8  # a larger embedding leaves ids unused: allowed
    with pytest.raises(ValueError, match=r"tokenizer 'bytes'; the model expects 'llama3'$"):
        source(root, tokenizer="llama3")
    bad = dataset(tmp_path / "b", train=(np.arange(0, 41) + 250,))  # ids 250..290: past 257
    with pytest.raises(ValueError, match=r"train/shard_00000.bin: holds token id 2\d\d, outside the tokenizer's "
                                         r"vocabulary \(257\)"):
        source(bad).batch(Position(0, 0))


@pytest.mark.hostile
def test_a_manifest_without_a_token_section_says_what_it_is(tmp_path):
    root = dataset(tmp_path)
    rewrite(root, lambda m: (m["params"].clear(), m.update(layout="imagefolder")))
    with pytest.raises(ValueError, match=r"has no params.tokens section: it is not a pre-tokenized dataset "
                                         r"\(layout 'imagefolder'\)"):
        source(root)
    with pytest.raises(ValueError, match=r"cannot read the dataset's manifest \(No such file or directory\)"):
        source(tmp_path / "nowhere")


def test_validation_batches_are_fixed_spread_over_the_val_split(tmp_path):
    root = dataset(tmp_path, val=(np.arange(200, 265),), vocab=1000)  # 64 // 8 = 8 windows
    a = validation_batches(root, seq_len=8, batch=2, max_batches=3, device=CPU)
    b = validation_batches(root, seq_len=8, batch=2, max_batches=3, device=CPU)
    assert len(a) == 3 and all(torch.equal(x, x2) and torch.equal(y, y2) for (x, y), (x2, y2) in zip(a, b))
    assert [x[:, 0].tolist() for x, _ in a] == [[200, 208], [216, 232], [240, 248]]  # windows 0-2, 4-6 of 0-7
    assert all(torch.equal(x[:, 1:], y[:, :-1]) for x, y in a)
    assert len(validation_batches(root, seq_len=8, batch=2, max_batches=100, device=CPU)) == 4
    with pytest.raises(ValueError, match=r"split 'val' has 8 windows of 9 tokens, fewer than one batch of 9"):
        validation_batches(root, seq_len=8, batch=9, max_batches=1, device=CPU)
    with pytest.raises(ValueError, match=r"split 'val' has no whole window of seq_len \+ 1 = 66 tokens"):
        validation_batches(root, seq_len=65, batch=1, max_batches=1, device=CPU)


def test_synthetic_tokens_are_one_fixed_batch_kept_on_the_device():
    a = SyntheticTokens(batch=3, seq_len=16, vocab_size=257, device=CPU, seed=1)
    x, y = a.batch(Position())
    assert a.size is None and x.shape == y.shape == (3, 16) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1]) and 0 <= int(x.min()) and int(x.max()) < 257
    assert a.batch(Position(5, 7))[0] is x  # the same tensor every step
    assert torch.equal(SyntheticTokens(batch=3, seq_len=16, vocab_size=257, device=CPU, seed=1).x, x)
    assert not torch.equal(SyntheticTokens(batch=3, seq_len=16, vocab_size=257, device=CPU, seed=2).x, x)
    with pytest.raises(ValueError, match="vocab_size must be >= 2|vocab_size 1"):
        SyntheticTokens(batch=3, seq_len=16, vocab_size=1, device=CPU, seed=1)
