"""The ``allreduce`` workload: nccl-tests' all_reduce_perf, in torch.distributed.

Messages double from 8 B up to ``--max-bytes`` (nccl-tests ``-b 8 -f 2 -e``); for each size every
rank runs ``--warmup-steps`` untimed and ``--steps`` timed in-place all-reduces (sum, float32),
then the ranks average their time per operation, as nccl-tests does (src/common.cu: the per-rank
``deltaSec`` is all-reduced with ``average``). Rank 0 writes one line per size to
``metrics/allreduce.jsonl``: time, algorithm bandwidth ``S / t`` and bus bandwidth
``algbw x 2(n-1)/n`` in GB/s of 1e9 bytes (``core.catalog.fabric.bus_bandwidth``, nccl-tests
doc/PERFORMANCE.md). NCCL on GPUs, gloo on CPUs (the trainer's ``Run`` picks the backend).

The largest size is capped by free memory as nccl-tests caps it (src/common.cu: free memory less
1 GB of reserve, halved for NCCL's own buffers); a capped run says so in its run_info event.
"""

from __future__ import annotations

import os
import time
from typing import Any

from core.catalog.fabric import bus_bandwidth
from core.contract.names import ALLREDUCE_LINES_FILE
from workloads.train.common.device import device_info
from workloads.train.common.metrics import JsonLines, metrics_dir
from workloads.train.common.startup import startup_event

MIN_BYTES = 8
ELEMENT_BYTES = 4  # float32
RESERVE_BYTES = 2**30


def message_sizes(max_bytes: int) -> list[int]:
    """8, 16, 32, ... bytes up to ``max_bytes`` (nothing below 8)."""
    sizes, size = [], MIN_BYTES
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def memory_cap(free_bytes: int, processes: int = 1) -> int:
    """The largest power-of-two message one process can hold: its share of ``free_bytes`` less the
    reserve, halved (nccl-tests: ``(maxMem - reserveMem - 1 GB) / 2``), never below 8 B."""
    room = (free_bytes // max(processes, 1) - RESERVE_BYTES) // 2
    cap = MIN_BYTES
    while cap * 2 <= room:
        cap *= 2
    return cap


def bandwidths(nbytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one ``nbytes`` all-reduce that took ``seconds``."""
    algbw = nbytes / 1e9 / seconds
    return algbw, bus_bandwidth(algbw, world_size)


def mem_available(meminfo: str) -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes: free memory plus the page cache the kernel can
    drop (proc(5)); plain free memory (``MemFree``, sysconf's available pages) leaves the cache out
    and can be a few MiB on a busy machine with GiBs to spare."""
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def free_memory(device: Any) -> tuple[int, int]:
    """(free bytes, processes sharing them): the GPU's own, or the host's available memory."""
    if device.type == "cuda":
        import torch

        return torch.cuda.mem_get_info(device)[0], 1
    try:
        with open("/proc/meminfo") as f:
            available = mem_available(f.read())
    except OSError:
        available = None
    if available is None:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return available, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def _time_per_op(run: Any, buf: Any, iters: int) -> tuple[float, float]:
    """(mean over ranks, slowest rank) seconds per all-reduce of ``buf``."""
    import torch
    import torch.distributed as dist

    run.sync()
    run.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    run.sync()
    mine = (time.perf_counter() - t0) / iters
    t = torch.tensor([mine, mine], dtype=torch.float64, device=run.device)
    dist.all_reduce(t[:1])
    dist.all_reduce(t[1:], op=dist.ReduceOp.MAX)
    return float(t[0]) / run.world, float(t[1])


def _check(buf: Any, rank: int, world: int) -> None:
    """One all-reduce of rank+1 everywhere must give n(n+1)/2: a wrong sum fails the run."""
    import torch.distributed as dist

    buf.fill_(rank + 1)
    dist.all_reduce(buf)
    got, want = float(buf[0]), world * (world + 1) / 2
    if got != want:
        raise RuntimeError(f"all_reduce gave {got}, expected {want} (sum of rank+1 over {world} ranks)")
    buf.zero_()  # zeros stay zeros however often they are summed


def run_allreduce(run: Any) -> int:
    """The workload's loop on one rank of a ``workloads.train.pytorch.trainer.Run``; returns the sizes measured."""
    import torch

    a = run.args
    if not run.distributed:
        raise RuntimeError("allreduce needs at least 2 processes (run it under torchrun)")
    free, sharing = free_memory(run.device)
    cap = memory_cap(free, sharing)
    sizes = message_sizes(min(a.max_bytes, cap))
    capped = a.max_bytes > cap
    buf = torch.empty(sizes[-1] // ELEMENT_BYTES, dtype=torch.float32, device=run.device)
    _check(buf, run.rank, run.world)
    run.marks["built"] = time.time()
    harness = a.harness and run.rank == 0
    mdir = metrics_dir(a.results_dir)
    lines = JsonLines(mdir / ALLREDUCE_LINES_FILE) if harness else None
    events = JsonLines(mdir / "events.jsonl") if harness else None
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cuda = run.device.type == "cuda"
    if events:
        events.write({"event": "run_info", "step": 0, "restart": run.env["restart"], "world_size": run.world,
                      "nodes": max(1, run.world // max(local, 1)), "gpus_per_node": local if cuda else 0,
                      "processes_per_node": local, "device": device_info(run.device, run.world),
                      "precision": "fp32", "max_bytes": sizes[-1],
                      "max_bytes_note": (f"--max-bytes {a.max_bytes} capped to {sizes[-1]} by free memory "
                                         f"({free} B for {sharing} process(es))") if capped else None,
                      "wall_time": round(time.time(), 3)})
    if run.rank == 0:
        print(f"[workloads.train] allreduce: {run.world} ranks on {run.device}, {sizes[0]} to {sizes[-1]} B, "
              f"{a.warmup_steps} warm-up + {a.steps} timed per size", flush=True)
        print(f"{'bytes':>12} {'time_us':>12} {'algbw_GB/s':>11} {'busbw_GB/s':>11}", flush=True)
    loop_start = time.perf_counter()
    for nbytes in sizes:
        view = buf[:nbytes // ELEMENT_BYTES]
        for _ in range(a.warmup_steps):
            torch.distributed.all_reduce(view)
        mean_s, max_s = _time_per_op(run, view, a.steps)
        algbw, busbw = bandwidths(nbytes, mean_s, run.world)
        if run.rank == 0:
            print(f"{nbytes:>12} {mean_s * 1e6:>12.2f} {algbw:>11.4f} {busbw:>11.4f}", flush=True)
        if events and nbytes == sizes[0]:  # the start-up record, as the training loop's first step writes it
            events.write(startup_event(run.marks, time.time(), step=1, restart=run.env["restart"]))
        if lines:
            lines.write({"bytes": nbytes, "count": nbytes // ELEMENT_BYTES, "dtype": "float32",
                         "warmup_iters": a.warmup_steps, "iters": a.steps, "time_us": round(mean_s * 1e6, 3),
                         "time_max_us": round(max_s * 1e6, 3), "algbw_gbps": round(algbw, 6),
                         "busbw_gbps": round(busbw, 6), "world_size": run.world,
                         "wall_time": round(time.time(), 3)})
    run.loop_seconds = time.perf_counter() - loop_start
    if events:
        events.write({"event": "end", "step": len(sizes), "steps": len(sizes), "samples": 0,
                      "loop_seconds": round(run.loop_seconds, 4), "final_save_s": 0.0,
                      "restart": run.env["restart"], "world_size": run.world, "wall_time": round(time.time(), 3)})
    for f in (lines, events):
        if f:
            f.close()
    run.barrier()
    return len(sizes)
