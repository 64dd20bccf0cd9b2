"""The allreduce workload: a real 2-process gloo run through the launcher, and its arithmetic."""

from __future__ import annotations

import json
import socket

import pytest

from core.contract.train_args import TrainArgs
from tests.workloads.conftest import child_env, launched_on_two_gloo_processes, run_training
from workloads.train.common.metrics import metrics_dir, read_jsonl
from workloads.train.pytorch.allreduce import (
    bandwidths,
    mem_available,
    memory_cap,
    message_sizes,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory):
    """Launcher -> torchrun (2 processes, c10d on loopback) -> workloads.train --workload=allreduce."""
    results = tmp_path_factory.mktemp("allreduce") / "ar"
    args = TrainArgs(workload="allreduce", steps=4, warmup_steps=1, results_dir=str(results), max_bytes=2**16,
                     collective_timeout=60)
    done = run_training(launched_on_two_gloo_processes(args, "ar"), env=child_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return results, json.loads((results / "summary.json").read_text())


def test_two_gloo_processes_measure_every_size_from_8_bytes(gloo_run):
    results, summary = gloo_run
    lines = read_jsonl(metrics_dir(results) / "allreduce.jsonl")
    assert [r["bytes"] for r in lines] == [2**k for k in range(3, 17)]
    assert all(r["world_size"] == 2 and r["iters"] == 4 and r["warmup_iters"] == 1 for r in lines)
    assert all(r["time_us"] > 0 and r["time_max_us"] >= r["time_us"] * 0.999 for r in lines)
    assert summary["status"] == "succeeded" and summary["config"]["workload"] == "allreduce"
    assert summary["world_sizes"] == [] and summary["nodes"] == 1  # no training lines; the run_info event
    assert summary["model"].startswith("torch.distributed all_reduce")


def test_each_sizes_bandwidths_are_the_hand_computed_ones(gloo_run):
    """algbw = bytes / 1e9 / seconds; busbw = algbw x 2(n-1)/n, with n = 2 ranks: x 1."""
    results, _ = gloo_run
    for r in read_jsonl(metrics_dir(results) / "allreduce.jsonl"):
        by_hand = r["bytes"] / 1e9 / (r["time_us"] / 1e6)
        assert r["algbw_gbps"] == pytest.approx(by_hand, rel=1e-3, abs=2e-6)
        assert r["busbw_gbps"] == pytest.approx(by_hand * 2 * (2 - 1) / 2, rel=1e-3, abs=2e-6)


def test_the_summary_carries_the_curve_its_peak_and_no_1_gib_point(gloo_run):
    results, summary = gloo_run
    b = summary["busbw"]
    lines = read_jsonl(metrics_dir(results) / "allreduce.jsonl")
    assert [(p["bytes"], p["busbw_gbps"]) for p in b["curve"]] == [(r["bytes"], r["busbw_gbps"]) for r in lines]
    assert b["peak_gbps"] == max(r["busbw_gbps"] for r in lines) > 0
    assert b["at_1gib_gbps"] is None  # the run stopped at 64 KiB
    assert b["expected"]["below"] is None and "no published" in b["expected"]["note"]
    assert summary["fabric"]["verdict"].startswith("not checked") and summary["flags"] == []


def test_busbw_scales_algbw_by_two_n_minus_one_over_n():
    # 1 GiB in 10 ms on 8 ranks: algbw 107.374 GB/s, busbw x 14/8 = 187.904 GB/s
    algbw, busbw = bandwidths(2**30, 0.010, 8)
    assert round(algbw, 3) == 107.374 and round(busbw, 3) == 187.905


def test_sizes_double_from_8_bytes_and_memory_caps_the_largest():
    assert message_sizes(64) == [8, 16, 32, 64] and message_sizes(100) == [8, 16, 32, 64]
    assert message_sizes(2**30)[-1] == 2**30 and len(message_sizes(2**30)) == 28
    # 80 GB GPU, nothing else on it: (80e9 - 1 GiB) / 2 -> the largest power of two is 32 GiB
    assert memory_cap(80 * 10**9) == 2**35
    # 24 GiB host shared by 2 processes: (12 GiB - 1 GiB) / 2 = 5.5 GiB -> 4 GiB
    assert memory_cap(24 * 2**30, 2) == 2**32
    assert memory_cap(0) == 8


def test_host_memory_counts_the_page_cache_the_kernel_can_drop():
    # A busy host: 90 MiB free, 20 GiB available (proc(5) MemAvailable)
    meminfo = "MemTotal:       24000000 kB\nMemFree:           92160 kB\nMemAvailable:   20971520 kB\n"
    assert mem_available(meminfo) == 20971520 * 1024
    assert memory_cap(mem_available(meminfo), 2) == 2**32  # (10 GiB - 1 GiB) / 2 -> 4 GiB
    assert mem_available("MemTotal: 1 kB\n") is None
