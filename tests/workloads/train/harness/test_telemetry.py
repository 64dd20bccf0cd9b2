"""The launcher's hardware sampler (workloads/train/harness/telemetry.py) and its summary block, on a fake NVML."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support.fake_nvml import FakeGpu, FakeNvml, NotSupported, NVMLError
from workloads.train.harness import launch
from workloads.train.harness.telemetry import LineBudget, Sampler, open_source, throttle_names
from workloads.train.harness.telemetry_summary import file_lines, steady_window, summarise, summarise_files


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def sampled(tmp_path, nvml, seconds: int, *, node="node-0", max_bytes=1 << 20, powercap=None, clock=None):
    """A sampler driven by hand: one sample a second for ``seconds`` seconds, then stopped."""
    clock = clock or Clock()
    source, reason = open_source(nvml, powercap or tmp_path / "no-powercap")
    sampler = Sampler(tmp_path, node, source=source, reason=reason, clock=clock, max_bytes=max_bytes)
    sampler._file = open(sampler.path.parent.mkdir(parents=True, exist_ok=True) or sampler.path, "ab")
    sampler.sample()
    for _ in range(seconds):
        clock.t += 1
        sampler.sample()
    sampler.stop()
    return sampler


def test_each_gpu_is_read_through_nvml_with_running_totals(tmp_path):
    nvml = FakeNvml([FakeGpu(), FakeGpu(power_mw=300_000, throttle=0x4 | 0x1, pcie=False, nvlink=False)])
    sampler = sampled(tmp_path, nvml, 10)
    lines = [json.loads(x) for x in (tmp_path / "telemetry/node-0.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and nvml.initialised == 0  # a line a second, the last at stop; NVML shut down
    a, b = lines[-1]["gpus"]
    assert a == {"index": 0, "util_pct": 90, "mem_used_bytes": 40 * 2**30, "mem_total_bytes": 80 * 2**30,
                 "power_w": 500.0, "power_limit_w": 700.0, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
                 "temperature_c": 60, "throttle": [], "pcie_tx_kbps": 1000, "pcie_rx_kbps": 1001,
                 "nvlink_tx_kib": 966, "nvlink_rx_kib": 973, "energy_j": 5000.0, "throttled_s": 0.0}
    # a reading the GPU does not support is null; the idle bit is not throttling, the power cap is
    assert b["pcie_tx_kbps"] is None and "nvlink_tx_kib" not in b and b["throttle"] == ["sw_power_cap"]
    assert b["energy_j"] == 3000.0 and b["throttled_s"] == 10.0
    assert sampler.kind == "nvml" and sampler.reason is None


def test_the_summary_block_has_every_figure_of_a_gpu_run(tmp_path):
    util = lambda call: 0 if call <= 3 else 80  # noqa: E731 - idle for the first samples, then busy
    nvml = FakeNvml([FakeGpu(util=util), FakeGpu(util=util, used=70 * 2**30, throttle=0x40)])
    sampled(tmp_path, nvml, 20)
    block = summarise_files([tmp_path], own="node-0", source="nvml", reason=None, window=(1000.0, 1020.0))
    assert block == {"source": "nvml", "reason": None, "nodes": 1, "gpus": 2, "samples": 22, "seconds": 20.0,
                     "util_mean_pct": 72.0, "util_p95_pct": 80, "memory_peak_bytes": 70 * 2**30,
                     "memory_total_bytes": 80 * 2**30, "power_mean_w": 1000.0, "energy_j": 20000.0,
                     "energy_source": "power_integral", "energy_to_accuracy_j": None, "throttle_s": 20.0,
                     "idle_share": 0.1}
    # energy is mean power times the time sampled
    assert block["energy_j"] == pytest.approx(block["power_mean_w"] * block["seconds"])


# --- energy: NVML's energy counter where the GPU has it, else the power integral ----------------------------------


class CountingNvml(FakeNvml):
    """The stand-in NVML with each GPU's energy counter (pynvml's ``nvmlDeviceGetTotalEnergyConsumption(handle)``:
    millijoules since the driver loaded, NVMLError_NotSupported before Volta): ``count(gpu, t)`` gives it at the
    clock's time ``t``, or raises."""

    def __init__(self, gpus: list[FakeGpu], clock: Clock, count):
        super().__init__(gpus)
        self.clock, self.count = clock, count

    def nvmlDeviceGetTotalEnergyConsumption(self, h: FakeGpu) -> int:
        return self.count(next(i for i, g in enumerate(self.gpus) if g is h), self.clock.t - 1000.0)  # equal GPUs


def counted_run(tmp_path, count, window=None) -> tuple[dict, list[dict]]:
    """Two GPUs whose power reads 300 W each for 20 s, their counters as ``count`` says: (the block, the lines)."""
    clock = Clock()
    sampled(tmp_path, CountingNvml([FakeGpu(power_mw=300_000), FakeGpu(power_mw=300_000)], clock, count), 20,
            clock=clock)
    block = summarise_files([tmp_path], own="node-0", source="nvml", reason=None, to_accuracy=window)
    return block, list(file_lines(tmp_path / "telemetry/node-0.jsonl"))


def test_the_energy_is_nvmls_counter_where_the_power_samples_disagree_with_it(tmp_path):
    """The power says 300 W, the counter 200 W' worth (from a count far from 0, as a driver loaded long ago has):
    the energy, its mean power and the energy to accuracy follow the counter, and the summary names it."""
    block, lines = counted_run(tmp_path, lambda gpu, t: 7 * 10**12 + gpu + int(200_000 * t), window=(1002.0, 1010.5))
    assert block["energy_source"] == "nvml_energy_counter"
    assert block["energy_j"] == 2 * 200 * 20 and block["power_mean_w"] == 400.0
    assert block["energy_to_accuracy_j"] == 2 * 200 * 8.5
    last = lines[-1]["gpus"][0]  # each line keeps both: the counter's joules and the power integral
    assert last["energy_counter_j"] == 4000.0 and last["energy_j"] == 6000.0 and "energy_mj" not in last


def test_a_gpu_without_the_counter_is_integrated_and_the_summary_says_so(tmp_path):
    def count(gpu, t):
        raise NotSupported()

    block, lines = counted_run(tmp_path, count, window=(1002.0, 1010.5))
    assert block["energy_source"] == "power_integral"
    assert block["energy_j"] == 2 * 300 * 20 and block["energy_to_accuracy_j"] == 2 * 300 * 8.5
    assert all("energy_counter_j" not in g for line in lines for g in line["gpus"])


def test_a_counter_that_goes_back_gives_the_power_integral(tmp_path):
    """GPU 1's counter falls at 12 s (a reset): it has no count from there on, and the whole run is integrated, so
    the one figure is one method."""
    block, lines = counted_run(tmp_path, lambda gpu, t: int(200_000 * (t if gpu == 0 or t < 12 else t - 12)))
    assert [("energy_counter_j" in g) for g in lines[12]["gpus"]] == [True, False]
    assert [("energy_counter_j" in g) for g in lines[11]["gpus"]] == [True, True]
    assert "energy_counter_j" not in lines[-1]["gpus"][1]  # a count after the reset is not trusted again
    assert block["energy_source"] == "power_integral" and block["energy_j"] == 2 * 300 * 20


def test_the_counters_energy_adds_up_over_a_retried_pods_attempts():
    """Each attempt's sampler counts from its first reading: the energy is the attempts' sum, as for the integral;
    one line of one node without the count makes the run's energy the integral."""
    line = lambda t, integral, counter: {"t": t, "gpus": [{"index": 0, "energy_j": integral,  # noqa: E731
                                                            "energy_counter_j": counter}]}
    lines = [line(0.0, 0.0, 0.0), line(10.0, 3000.0, 2000.0), line(20.0, 0.0, 0.0), line(30.0, 3000.0, 2000.0)]
    block = summarise({"node-0": lines, "node-1": lines}, source="nvml", reason=None, to_accuracy=(0.0, 25.0))
    assert block["energy_source"] == "nvml_energy_counter" and block["energy_j"] == 8000.0
    assert block["energy_to_accuracy_j"] == 2 * 3000.0
    no_count = [*lines[:3], {"t": 30.0, "gpus": [{"index": 0, "energy_j": 3000.0}]}]
    block = summarise({"node-0": lines, "node-1": no_count}, source="nvml", reason=None)
    assert block["energy_source"] == "power_integral" and block["energy_j"] == 12000.0


# --- energy to accuracy: the running totals over the time to accuracy's window -----------------------------------


def test_the_energy_to_accuracy_is_read_between_the_samples_around_both_ends(tmp_path):
    sampled(tmp_path, FakeNvml([FakeGpu(), FakeGpu()]), 20)  # 2 x 500 W from t=1000 to 1020
    block = lambda window: summarise_files([tmp_path], own="node-0", source="nvml", reason=None,  # noqa: E731
                                           to_accuracy=window)
    assert block((1002.0, 1010.5))["energy_to_accuracy_j"] == 8_500.0  # 1,000 W for 8.5 s
    assert block((1000.0, 1020.0))["energy_to_accuracy_j"] == block(None)["energy_j"] == 20_000.0
    for never in (None, (1000.0, 1020.5), (999.0, 1010.0), (True, 1010.0)):  # none reached; past the lines; not a time
        assert block(never)["energy_to_accuracy_j"] is None, never


def test_a_thinned_file_still_gives_the_energy_to_accuracy(tmp_path):
    sampled(tmp_path, FakeNvml([FakeGpu()] * 8), 3000, max_bytes=64 * 1024)
    lines = list(file_lines(tmp_path / "telemetry/node-0.jsonl"))
    assert len(lines) < 3000 / 4  # most lines left out around both ends
    block = summarise({"node-0": lines}, source="nvml", reason=None, to_accuracy=(1200.5, 2500.25))
    assert block["energy_to_accuracy_j"] == pytest.approx(8 * 500.0 * 1299.75)


def test_every_nodes_energy_counts_or_none(tmp_path):
    """A node whose samples ended before the evaluation has no share to add: the sum would understate it."""
    line = lambda t, joules: {"t": t, "gpus": [{"index": 0, "energy_j": joules}]}  # noqa: E731
    both = {"node-0": [line(0.0, 0.0), line(10.0, 1000.0)], "node-1": [line(0.0, 0.0), line(10.0, 3000.0)]}
    assert summarise(both, source="nvml", reason=None, to_accuracy=(0.0, 5.0))["energy_to_accuracy_j"] == 2000.0
    short = {**both, "node-1": [line(0.0, 0.0), line(4.0, 1200.0)]}
    assert summarise(short, source="nvml", reason=None, to_accuracy=(0.0, 5.0))["energy_to_accuracy_j"] is None
    hostile = {"node-0": [line(0.0, 0.0), {"t": 10.0, "gpus": [{"energy_j": "lots"}, "x"], "cpu": "hot"},
                          line(20.0, -5.0)]}
    block = summarise(hostile, source="nvml", reason=None, to_accuracy=(0.0, 5.0))
    assert block["energy_to_accuracy_j"] == block["energy_j"] == 0.0  # what is not a count counts nothing


def test_a_retried_pods_new_sampler_adds_to_the_attempts_before_it():
    """A retried pod appends to its node's file, its sampler's totals from 0 again: energy and throttled time are
    the attempts' sum, and the energy to accuracy of an evaluation in the second attempt counts the first too."""
    line = lambda t, joules, throttled: {"t": t, "gpus": [{"index": 0, "energy_j": joules,  # noqa: E731
                                                           "throttled_s": throttled}]}
    lines = [line(0.0, 0.0, 0.0), line(10.0, 1000.0, 2.0), line(20.0, 0.0, 0.0), line(30.0, 1000.0, 1.0)]
    block = lambda window: summarise({"node-0": lines}, source="nvml", reason=None, to_accuracy=window)  # noqa: E731
    assert block(None)["energy_j"] == 2000.0 and block(None)["throttle_s"] == 3.0
    assert block((0.0, 25.0))["energy_to_accuracy_j"] == 1500.0
    assert block((0.0, 15.0))["energy_to_accuracy_j"] == 1000.0  # between the attempts: nothing sampled


def test_the_summary_reads_the_energy_up_to_the_first_evaluation_at_the_target(tmp_path):
    from workloads.train.harness.collect import collect_metrics

    sampler = sampled(tmp_path, FakeNvml([FakeGpu(), FakeGpu()]), 20)
    evals = [{"step": 10, "epoch": 0, "accuracy": 0.5, "elapsed_s": 5.0, "wall_time": 1005.0},
             {"step": 30, "epoch": 2, "accuracy": 0.9, "elapsed_s": 17.0, "wall_time": 1017.0},
             {"step": 20, "epoch": 1, "accuracy": 0.8, "elapsed_s": 12.0, "wall_time": 1012.0}]
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    figures = collect_metrics(tmp_path, 0.75, sampler=sampler, node_id="node-0")
    assert figures["accuracy"]["time_to_accuracy_s"] == 12.0
    assert figures["telemetry"]["energy_to_accuracy_j"] == 12_000.0  # 2 x 500 W for the 12 s to the step-20 eval
    assert collect_metrics(tmp_path, 0.95, sampler=sampler, node_id="node-0")["telemetry"]["energy_to_accuracy_j"] \
        is None


def test_the_file_stays_within_its_bound_and_keeps_the_totals(tmp_path):
    sampled(tmp_path, FakeNvml([FakeGpu()] * 8), 3000, max_bytes=64 * 1024)
    path = tmp_path / "telemetry/node-0.jsonl"
    lines = list(file_lines(path))
    assert path.stat().st_size < 64 * 1024 + 2 * len(path.read_bytes().splitlines()[-1])
    assert lines[0]["t"] == 1000.0 and lines[-1]["t"] == 4000.0  # start to end, thinned in between
    block = summarise({"node-0": lines}, source="nvml", reason=None)
    assert block["energy_j"] == 8 * 500.0 * 3000 and block["util_mean_pct"] == 90.0


def test_line_budget_halves_the_rate_as_the_file_fills():
    budget = LineBudget(max_bytes=1000)
    taken = [budget.take(100) for _ in range(20)]
    assert taken[:5] == [True] * 5 and taken[5:9] == [False, True, False, True]
    assert budget.take(100, last=True)


def test_throttle_reasons_are_named_from_nvmls_bits():
    assert throttle_names(0x1 | 0x2 | 0x10 | 0x100) == []  # idle, application clocks, sync boost, display
    assert throttle_names(0x4 | 0x8 | 0x20 | 0x40 | 0x80) == ["sw_power_cap", "hw_slowdown", "sw_thermal",
                                                              "hw_thermal", "hw_power_brake"]


def rapl_tree(root, energy_uj, max_uj=1_000_000):
    zone = root / "intel-rapl:0"
    (zone / "intel-rapl:0:0").mkdir(parents=True, exist_ok=True)  # a sub-zone: counted in its package already
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (zone / "intel-rapl:0:0" / "energy_uj").write_text("5\n")
    return zone


def test_a_cpu_records_its_rapl_energy_and_says_why_there_is_no_gpu_telemetry(tmp_path):
    zone = rapl_tree(tmp_path / "powercap", 900_000)
    source, reason = open_source(FakeNvml([], fail_init=NVMLError("NVML Shared Library Not Found")),
                                 tmp_path / "powercap")
    assert source.kind == "rapl" and source.zones == [zone]
    assert reason == "no GPU telemetry on this run (NVML: NVML Shared Library Not Found)"
    (zone / "energy_uj").write_text("100000\n")  # wrapped past 1,000,000: 200,000 uJ
    assert source.read() == {"cpu": {"energy_j": 0.2}}
    (zone / "energy_uj").write_text("400000\n")
    assert source.read() == {"cpu": {"energy_j": 0.5}}


def test_a_cpu_run_sampled_through_rapl_gives_power_and_energy_only(tmp_path):
    rapl_tree(tmp_path / "powercap", 0, max_uj=10**12)
    sampler = Sampler(tmp_path, "node-0", **dict(zip(("source", "reason"), open_source(
        FakeNvml([]), tmp_path / "powercap"))), clock=Clock())
    sampler._file = open(sampler.path.parent.mkdir(parents=True) or sampler.path, "ab")
    for energy in (0, 30_000_000, 60_000_000):  # 30 J a second
        (tmp_path / "powercap/intel-rapl:0/energy_uj").write_text(str(energy))
        sampler.sample()
        sampler.clock.t += 1
    sampler.stop()
    block = summarise_files([tmp_path], own="node-0", source=sampler.kind, reason=sampler.reason)
    assert block["source"] == "rapl" and block["reason"] == "no GPU telemetry on this run (NVML sees no GPU)"
    assert block["energy_source"] == "rapl"
    assert block["energy_j"] == 60.0 and block["power_mean_w"] == 20.0  # 60 J over the 3 s from first to last
    assert block["util_mean_pct"] is None and block["gpus"] == 0 and block["throttle_s"] is None


def test_without_nvml_and_rapl_nothing_is_recorded_and_the_reason_says_why(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    sampler = Sampler.open(tmp_path, "node-0", powercap=tmp_path / "none")
    sampler.stop()
    assert sampler.kind is None and not (tmp_path / "telemetry").exists()
    assert sampler.reason == ("no GPU telemetry on this run (pynvml (nvidia-ml-py) is not installed); no CPU energy "
                              f"either: no RAPL energy counter under {tmp_path / 'none'}")
    block = summarise_files([tmp_path], own="node-0", source=sampler.kind, reason=sampler.reason)
    assert block["source"] is None and block["reason"] == sampler.reason and block["energy_j"] is None
    assert block["energy_source"] is None


def test_the_steady_window_runs_from_the_first_steady_step_to_the_last_line():
    lines = {0: [{"wall_time": 10.0, "warmup": True, "step_time_s": 5}, {"wall_time": 14.0, "step_time_s": 2},
                 {"wall_time": 20.0, "step_time_s": 2}], 1: [{"wall_time": 21.0, "step_time_s": 2}]}
    assert steady_window(lines) == (12.0, 21.0)
    assert steady_window({0: [{"step": 1}]}) is None


def test_the_launcher_summary_carries_the_telemetry_of_its_command(tmp_path, monkeypatch):
    nvml = FakeNvml([FakeGpu(), FakeGpu()])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    code = launch.main(["--results-dir", str(tmp_path), "--node-id", "node-0", "--summary", "always", "--",
                        sys.executable, "-c", "import time; time.sleep(1.5)"])
    assert code == 0 and nvml.initialised == 0
    block = json.loads((tmp_path / "summary.json").read_text())["telemetry"]
    assert block["source"] == "nvml" and block["gpus"] == 2 and block["samples"] >= 2
    assert block["energy_j"] == pytest.approx(1000.0 * block["seconds"], rel=0.01)
    assert len((tmp_path / "telemetry/node-0.jsonl").read_text().splitlines()) == block["samples"]


def test_each_node_uploads_its_own_telemetry_file(tmp_path):
    from workloads.train.harness.upload import upload_plan

    for rel in ("summary.json", "telemetry/node-0.jsonl", "telemetry/node-1.jsonl"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    keys0 = [k for _, k in upload_plan(tmp_path, node_id="node-0", summary_node=True, prefix="p/")]
    keys1 = [k for _, k in upload_plan(tmp_path, node_id="node-1", summary_node=False, prefix="p/")]
    assert keys0 == ["p/summary.json", "p/telemetry/node-0.jsonl"] and keys1 == ["p/telemetry/node-1.jsonl"]


def test_a_cpu_runs_summary_carries_its_rapl_energy_and_the_sampler_can_be_left_out(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    rapl_tree(tmp_path / "powercap", 5_000_000, max_uj=10**12)
    argv = ["--node-id", "node-0", "--summary", "always", "--powercap", str(tmp_path / "powercap"),
            "--telemetry-interval", "0.2", "--", sys.executable, "-c", "import time; time.sleep(1)"]
    assert launch.main(["--results-dir", str(tmp_path / "on"), *argv]) == 0
    block = json.loads((tmp_path / "on" / "summary.json").read_text())["telemetry"]
    assert block["source"] == "rapl" and block["energy_j"] == 0.0 and block["samples"] >= 4
    assert block["reason"] == "no GPU telemetry on this run (pynvml (nvidia-ml-py) is not installed)"
    argv[argv.index("0.2")] = "0"
    assert launch.main(["--results-dir", str(tmp_path / "off"), *argv]) == 0
    block = json.loads((tmp_path / "off" / "summary.json").read_text())["telemetry"]
    assert block["reason"] == "no telemetry: the launcher ran without its sampler" and block["samples"] == 0
    assert not (tmp_path / "off" / "telemetry").exists()


def test_without_a_results_folder_the_source_is_closed_and_the_reason_kept():
    nvml = FakeNvml([FakeGpu()])
    sampler = Sampler.open(None, "node-0", nvml=nvml)
    assert nvml.initialised == 0 and sampler.kind == "nvml"
    assert sampler.reason == "no telemetry: no results folder to write telemetry/<node>.jsonl to"
    sampler.stop()
