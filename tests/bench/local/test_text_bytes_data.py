"""The language model's data on a local run: ``text-bytes`` prepared as the local run prepares it
(``datasets.prepare.prepare_local``, the path of ``eksbench data prepare text-bytes --to DIR``) is what the
trainer's token sources read: windows of English bytes, held-out validation batches."""

from __future__ import annotations

import torch

from datasets.prepare import prepare_local
from workloads.train.common.data import Position
from workloads.train.common.tokens import TokenShards, token_root, validation_batches


def test_the_prepared_text_bytes_reads_as_english(tmp_path):
    root = prepare_local("text-bytes", tmp_path / "data", created_at="2026-12-07T00:00:00+00:00")
    assert root == token_root(tmp_path / "data", "text-bytes")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["text-bytes"]  # the work folder is gone
    src = TokenShards(root, "train", batch=4, seq_len=128, device=torch.device("cpu"), seed=0, vocab_size=257)
    assert src.size == (131_072 - 1) // 128 * 2 + (55_583 - 1) // 128
    x, y = src.batch(Position(0, 0))
    assert x.shape == (4, 128) and int(x.max()) <= 256 and torch.equal(x[:, 1:], y[:, :-1])
    text = bytes(v for v in x[0].tolist() if v < 256).decode("utf-8", "replace")
    assert sum(c.isalpha() or c.isspace() for c in text) > 0.7 * len(text)
    val = validation_batches(root, seq_len=128, batch=8, max_batches=4, device="cpu", vocab_size=257)
    assert len(val) == 4 and val[0][0].shape == (8, 128)
