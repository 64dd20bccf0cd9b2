"""The figures the trainer's lines lead to: warm-up intervals, pauses, LR after a resize, FLOPs/MFU,
and checkpoints that cannot run code."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from dataclasses import replace

import pytest

from core.catalog.peaks import gpu_model, peak_tflops
from core.contract.train_args import TrainArgs
from tests.workloads.conftest import child_env, run_training
from workloads.train.common.metrics import read_jsonl
from workloads.train.harness.collect import nccl_transport
from workloads.train.harness.summary import (
    efficiency,
    metrics_summary,
    step_coverage,
    throughput,
)
from workloads.train.pytorch import checkpoint as ckpt

TINY = TrainArgs(workload="resnet50", batch_size=2, steps=8, image_size=32, width_per_group=4, precision="fp32",
                 checkpoint_every=0, warmup_steps=3, log_every=5)


def run_in_process(args: TrainArgs, monkeypatch) -> None:
    import torch

    from workloads.train.pytorch.trainer import Run

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    torch.set_num_threads(2)
    run = Run(args, {"rank": 0, "world_size": 1, "local_rank": 0, "restart": 0})
    try:
        run.build()
        run.train()
    finally:
        run.close()


def test_warm_up_ends_an_interval_even_when_log_every_is_longer(tmp_path, monkeypatch):
    # The issue's reproduction: --log-every 5 --warmup-steps 3 gave two lines, both "steady".
    run_in_process(replace(TINY, results_dir=str(tmp_path)), monkeypatch)
    lines = read_jsonl(tmp_path / "metrics" / "rank-0.jsonl")
    assert [(r["step"], r["warmup"]) for r in lines] == [(3, True), (5, False), (8, False)]
    assert [r["steps"] for r in lines] == [3, 2, 3]
    assert all(len(r["step_times_s"]) == r["steps"] for r in lines)
    tp = throughput({0: lines})
    assert tp["steady_steps"] == 5 and tp["steady_samples"] == 10
    assert tp["step_time_p50_s"] > 0 and tp["step_time_p95_s"] >= tp["step_time_p50_s"]
    assert step_coverage({0: lines}) == {"steps": 8, "duplicate_lines": 0, "missing_steps": []}


def test_time_based_checkpoints_close_an_interval_and_are_logged(tmp_path, monkeypatch):
    args = replace(TINY, results_dir=str(tmp_path), steps=6, log_every=2, warmup_steps=0,
                   checkpoint_minutes=1e-6)
    run_in_process(args, monkeypatch)
    events = read_jsonl(tmp_path / "metrics" / "events.jsonl")
    assert [e["step"] for e in events if e["event"] == "checkpoint"] == [2, 4, 6]  # 6: the final save
    assert json.loads((tmp_path / "checkpoints" / "latest.json").read_text())["step"] == 6


def test_a_run_with_both_checkpoint_settings_0_writes_no_checkpoint_and_runs_again_from_the_start(tmp_path,
                                                                                                 monkeypatch):
    """A throughput run (the dev stack's resnet50-synthetic) kept a 64 MB latest.pt no one reads."""
    off = replace(TINY, results_dir=str(tmp_path), checkpoint_every=0, checkpoint_minutes=0)
    run_in_process(off, monkeypatch)
    assert not (tmp_path / "checkpoints").exists() and not list(tmp_path.rglob("*.pt"))
    events = read_jsonl(tmp_path / "metrics" / "events.jsonl")
    assert not [e for e in events if e["event"] == "checkpoint"] and events[-1]["event"] == "end"
    # run again in the same folder (a restart): nothing to resume, so it starts at step 0 and each step is once
    run_in_process(off, monkeypatch)
    events = read_jsonl(tmp_path / "metrics" / "events.jsonl")
    assert [(e["event"], e["step"]) for e in events if e["event"] in ("start", "resume")] == [("start", 0)] * 2
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics" / "rank-0.jsonl")] == [3, 5, 8]
    assert not (tmp_path / "checkpoints").exists()


def test_step_checkpoints_alone_still_checkpoint_and_save_at_the_end(tmp_path, monkeypatch):
    run_in_process(replace(TINY, results_dir=str(tmp_path), checkpoint_every=3, checkpoint_minutes=0), monkeypatch)
    events = read_jsonl(tmp_path / "metrics" / "events.jsonl")
    assert [e["step"] for e in events if e["event"] == "checkpoint"] == [3, 6, 8]  # 8: the final save
    assert ckpt.load(ckpt.latest_path(tmp_path))["step"] == 8
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest.json", "latest.pt"]


def torchrun(tmp_path, nproc: int, *args: str, script: str | None = None) -> subprocess.CompletedProcess:
    runner = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    target = [script] if script else ["-m", "workloads.train.pytorch"]
    cmd = [*runner, *target, "--workload=resnet50", "--batch-size=2", "--image-size=32", "--width-per-group=4",
           "--precision=fp32", f"--results-dir={tmp_path}", *args]
    return run_training(cmd, env=child_env(1))


SLOW_CHECKPOINT = """
import sys, time
from workloads.train.pytorch import trainer

save = trainer.Run.save
def slow_save(self, *a, **k):
    if self.rank == 0 and not k.get("wait"):
        time.sleep(1.5)  # a checkpoint (or evaluation) that takes rank 0 a while
    return save(self, *a, **k)
trainer.Run.save = slow_save
sys.exit(trainer.main())
"""


@pytest.mark.local_run
def test_a_pause_on_rank_0_is_left_out_of_every_ranks_step_times(tmp_path):
    script = tmp_path / "slow_checkpoint.py"
    script.write_text(SLOW_CHECKPOINT)
    out = torchrun(tmp_path / "r", 2, "--steps=8", "--warmup-steps=1", "--log-every=1", "--checkpoint-every=4",
                   script=str(script))
    assert out.returncode == 0, out.stderr[-3000:]
    for rank in (0, 1):
        lines = read_jsonl(tmp_path / "r" / "metrics" / f"rank-{rank}.jsonl")
        assert [r["step"] for r in lines] == list(range(1, 9))
        slow = [(r["step"], r["step_time_s"]) for r in lines if r["step_time_s"] > 1.0]
        assert not slow, f"rank {rank}: the checkpoint pause leaked into {slow}"


@pytest.mark.local_run
def test_resume_in_a_bigger_world_sets_the_learning_rate_for_that_world(tmp_path):
    first = torchrun(tmp_path, 1, "--steps=4", "--warmup-steps=1", "--checkpoint-every=4")
    assert first.returncode == 0, first.stderr[-3000:]
    assert ckpt.load(ckpt.latest_path(tmp_path))["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.1 * 2 / 256)
    second = torchrun(tmp_path, 2, "--steps=6", "--warmup-steps=1", "--checkpoint-every=4")
    assert second.returncode == 0, second.stderr[-3000:]
    state = ckpt.load(ckpt.latest_path(tmp_path))
    assert state["step"] == 6
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.1 * 4 / 256)  # the saved world's 0.00078125 doubled
    resume = [e for e in read_jsonl(tmp_path / "metrics" / "events.jsonl") if e["event"] == "resume"]
    assert resume[-1]["world_size"] == 2 and resume[-1]["saved_world_size"] == 1
    assert resume[-1]["lr"] == pytest.approx(0.1 * 4 / 256)


class RunsCode:
    def __reduce__(self):
        return (exec, ("open(__import__('os').environ['EKSBENCH_PWNED'], 'w').write('ran')",))


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setenv("EKSBENCH_PWNED", str(marker))
    path = ckpt.latest_path(tmp_path)
    path.parent.mkdir(parents=True)
    import torch

    torch.save({"model": {}, "step": 3, "evil": RunsCode()}, path)  # a checkpoint file, tampered with
    with pytest.raises(pickle.UnpicklingError):
        ckpt.load_latest(tmp_path)
    assert not marker.exists()


def test_checkpoint_meta_is_plain_values_in_the_file_and_beside_it(tmp_path):
    import torch

    ckpt.save(tmp_path, {"model": {"w": torch.ones(2)}, "step": 5, "epoch": 1, "offset": 8, "run_started_at": 1.5,
                         "world_size": 2, "args": {"batch_size": 2}, "num_classes": 10})
    side = json.loads(ckpt.meta_path(tmp_path).read_text())
    assert side["step"] == 5 and side["args"] == {"batch_size": 2} and side["checkpoint"] == "latest.pt"
    state = ckpt.load_latest(tmp_path)
    assert state["step"] == 5 and state["world_size"] == 2 and torch.equal(state["model"]["w"], torch.ones(2))


# ---- efficiency figures -------------------------------------------------------------------

def test_gpu_names_map_to_the_peak_table():
    assert gpu_model("NVIDIA H100 80GB HBM3") == "H100" and gpu_model("Tesla V100-SXM2-16GB") == "V100"
    assert gpu_model("NVIDIA L40S") == "L40S" and gpu_model("NVIDIA L4") == "L4" and gpu_model("NVIDIA A10G") == "A10G"
    assert gpu_model("NVIDIA A100-SXM4-40GB") == "A100" and gpu_model("NVIDIA H200") == "H200"
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == (989.0, None)
    assert peak_tflops("Tesla V100-SXM2-16GB", "bf16")[0] is None
    assert "CPU" in peak_tflops("cpu", "bf16")[1]


def test_mfu_of_the_issues_goal_on_an_h100():
    # 5,000 img/s per H100 at 24.5 GFLOP per image = 122.5 TFLOP/s = 12.4% of 989
    tp = {"samples_per_s_total": 40_000.0, "samples_per_s_per_process": 5_000.0}
    info = {"flops_per_sample": 24.5e9, "device": {"name": "NVIDIA H100 80GB HBM3"}}
    e = efficiency(tp, info, "bf16")
    assert e["tflops_per_s"] == pytest.approx(980.0) and e["tflops_per_s_per_gpu"] == pytest.approx(122.5)
    assert e["mfu"] == pytest.approx(122.5 / 989, abs=1e-4) and "989" in e["mfu_note"]
    cpu = efficiency(tp, {"flops_per_sample": 1e9, "device": {"name": "cpu"}}, "bf16")
    assert cpu["mfu"] is None and "CPU" in cpu["mfu_note"] and cpu["flops_per_sample"] == 1e9


def test_summary_carries_device_loop_data_wait_and_peak_memory():
    lines = {0: [{"step": 2, "steps": 2, "samples": 4, "step_time_s": 1.0, "step_times_s": [0.5, 0.5],
                  "data_wait_s": 0.2, "peak_memory_gib": 3.5, "warmup": True},
                 {"step": 4, "steps": 2, "samples": 4, "step_time_s": 0.4, "step_times_s": [0.1, 0.3],
                  "data_wait_s": 0.05, "peak_memory_gib": 4.0, "warmup": False}],
             1: [{"step": 4, "steps": 2, "samples": 4, "step_time_s": 0.5, "step_times_s": [0.2, 0.3],
                  "data_wait_s": 0.1, "peak_memory_gib": 4.5, "warmup": False}]}
    events = [{"event": "run_info", "nodes": 2, "gpus_per_node": 1, "flops_per_sample": 2e9,
               "device": {"name": "NVIDIA A100-SXM4-40GB", "count": 2}},
              {"event": "end", "loop_seconds": 2.0, "samples": 16}]
    s = metrics_summary(lines, [], events, None, "bf16")
    assert s["throughput"]["step_time_p50_s"] == pytest.approx(0.25) and s["throughput"]["steady_steps"] == 2
    assert s["data_wait_s"] == 0.1 and s["loop_seconds"] == 2.0 and s["loop_samples_per_s"] == 8.0
    assert s["device"]["peak_memory_gib"] == 4.5 and s["nodes"] == 2 and s["gpus_per_node"] == 1
    assert s["mfu"] is not None and s["tflops_per_s"] == pytest.approx(2e9 * 8 / 0.5 / 1e12)


def test_nccl_transport_is_read_from_the_init_lines():
    efa = "node-0:12:34 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.13.2\nNCCL INFO Using network AWS Libfabric\n"
    tcp = "node-1:5:6 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.1.5<0>\nNCCL INFO Using network Socket\n"
    assert nccl_transport([efa])["nccl_transport"] == "NET/OFI"
    assert nccl_transport([tcp])["nccl_transport"] == "NET/Socket"
    assert nccl_transport([efa, tcp])["nccl_transport"] == ["NET/OFI", "NET/Socket"]
    gone = nccl_transport(["[workloads.train] rank 0/1 on cpu"])
    assert gone["nccl_transport"] is None and "NCCL_DEBUG" in gone["nccl_transport_note"]


@pytest.mark.parametrize("bf16", [False, True], ids=["no-bf16-cpu", "bf16-cpu"])
def test_a_cpu_process_trains_a_cluster_precision_as_its_cpu_allows(bf16, tmp_path, monkeypatch):
    """A cluster Job's amp-fp16 run by CPU processes (the pod sandbox, a CPU node) trains in the CPU's choice,
    never fp16 autocast with a GradScaler, and its run_info says both what was asked and what ran."""
    from workloads.train.common.cpu_choice import FORCE_BF16_ENV

    monkeypatch.setenv(FORCE_BF16_ENV, "1" if bf16 else "0")
    run_in_process(replace(TINY, results_dir=str(tmp_path), precision="amp-fp16", steps=2, warmup_steps=1,
                           log_every=1), monkeypatch)
    info = next(e for e in read_jsonl(tmp_path / "metrics" / "events.jsonl") if e["event"] == "run_info")
    assert (info["precision"], info["requested_precision"]) == ("bf16" if bf16 else "fp32", "amp-fp16")
    state = ckpt.load(str(tmp_path / "checkpoints" / "latest.pt"))
    assert not state["scaler"]  # GradScaler was never enabled: an empty state_dict


DDP_IN_A_GROUP_OF_ONE = """
import sys, warnings
from types import SimpleNamespace
import torch, torch.distributed as dist
from workloads.train.pytorch.trainer import Run

warnings.simplefilter("error", FutureWarning)  # torch 2.13+: broadcast_buffers is deprecated
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
run = SimpleNamespace(distributed=True, device=torch.device("cpu"), facts=SimpleNamespace(classifier=True),
                      args=SimpleNamespace(compile=False))
ddp = Run.distribute(run, model)
ddp(torch.randn(2, 3, 8, 8)).sum().backward()
print("buffers synced each forward:", ddp.broadcast_buffers)
dist.destroy_process_group()
"""


def test_ddp_keeps_batchnorm_buffers_per_rank_without_a_deprecation_warning(tmp_path):
    """Every node log of a local run opened with torch's FutureWarning about ``broadcast_buffers``."""
    script = tmp_path / "ddp.py"
    script.write_text(DDP_IN_A_GROUP_OF_ONE)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], env=child_env(1),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "FutureWarning" not in done.stderr
    assert "buffers synced each forward: False" in done.stdout


def test_ddp_gets_the_buffer_argument_its_torch_knows():
    """The cluster's images run torch 2.10 and 2.6, whose DDP has no ``forward_sync_buffers``."""
    from workloads.train.pytorch.collectives import no_forward_buffer_sync

    class OldDDP:  # torch 2.10's signature, cut to the arguments that matter here
        def __init__(self, module, device_ids=None, broadcast_buffers=True, gradient_as_bucket_view=False,
                     static_graph=False):
            pass

    class NewDDP:  # torch 2.14's (torch/nn/parallel/distributed.py)
        def __init__(self, module, device_ids=None, broadcast_buffers=None, init_sync=True,
                     gradient_as_bucket_view=False, static_graph=False, forward_sync_buffers=None):
            pass

    assert no_forward_buffer_sync(OldDDP) == {"broadcast_buffers": False}
    assert no_forward_buffer_sync(NewDDP) == {"forward_sync_buffers": False}
