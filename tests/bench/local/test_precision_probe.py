"""A local run times bf16 against fp32 for each PyTorch model shape on this CPU once, keeps the answer, and trains
in the faster (bench.local.precision_probe, workloads.train.pytorch.precision_probe)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.local import plan as lr
from bench.local.precision_probe import CACHE_FILE, key, measured
from core.config.model import Experiment, LocalRun
from tests.workloads.train.test_cpu_choice import EPYC, SPR
from workloads.train.common.cpu_choice import Measured, forced

SHAPE = "resnet50,64,16,8"


def fake_probe(answers: dict, calls: list):
    def probe(shapes: list[str], threads: int) -> dict:
        calls.append((tuple(shapes), threads))
        return {s: answers[s] for s in shapes if s in answers}
    return probe


def test_each_shape_is_timed_once_then_kept(tmp_path):
    env = {"EKSBENCH_CACHE": str(tmp_path)}
    calls: list = []
    probe = fake_probe({SHAPE: {"fp32_s": 0.19, "bf16_s": 0.23}}, calls)
    said: list[str] = []
    first = measured([SHAPE, SHAPE], facts=SPR, threads=1, environ=env, probe=probe, say=said.append)
    again = measured([SHAPE], facts=SPR, threads=1, environ=env, probe=probe, say=said.append)
    assert first == again == {SHAPE: Measured(fp32_s=0.19, bf16_s=0.23)}
    assert calls == [((SHAPE,), 1)] and len(said) == 1 and "timing bf16 against fp32" in said[0]
    kept = json.loads((tmp_path / CACHE_FILE).read_text())
    assert list(kept) == [key(SPR, __import__("importlib.metadata").metadata.version("torch"), SHAPE, 1)]
    # Another thread count is another answer.
    measured([SHAPE], facts=SPR, threads=2, environ=env, probe=probe, say=said.append)
    assert calls[-1] == ((SHAPE,), 2)


@pytest.mark.parametrize("facts", [EPYC, forced(SPR, "1"), forced(SPR, "0")], ids=["no-bf16", "forced-1", "forced-0"])
def test_nothing_is_timed_without_bf16_instructions_or_with_a_forced_kind(tmp_path, facts):
    calls: list = []
    assert measured([SHAPE], facts=facts, threads=1, environ={"EKSBENCH_CACHE": str(tmp_path)},
                    probe=fake_probe({}, calls), say=lambda _: None) == {}
    assert calls == []


def test_a_probe_that_fails_leaves_the_flags_to_decide_and_says_so(tmp_path):
    said: list[str] = []
    assert measured([SHAPE], facts=SPR, threads=1, environ={"EKSBENCH_CACHE": str(tmp_path)},
                    probe=fake_probe({}, []), say=said.append) == {}
    assert any("could not time resnet50,64,16,8" in s for s in said)
    assert not (tmp_path / CACHE_FILE).exists()


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"k": 5}', "x" * (2 << 20)])
def test_a_cache_file_that_is_not_ours_is_ignored_and_rewritten(tmp_path, content):
    (tmp_path / CACHE_FILE).write_text(content)
    calls: list = []
    got = measured([SHAPE], facts=SPR, threads=1, environ={"EKSBENCH_CACHE": str(tmp_path)},
                   probe=fake_probe({SHAPE: {"fp32_s": 0.2, "bf16_s": 0.1}}, calls), say=lambda _: None)
    assert got == {SHAPE: Measured(fp32_s=0.2, bf16_s=0.1)} and len(calls) == 1
    assert json.loads((tmp_path / CACHE_FILE).read_text())


def test_the_plan_trains_each_shape_in_its_measured_precision():
    local = LocalRun(image_size=64, width_per_group=16, batch_size=8)
    resnet = Experiment(name="r", workload="resnet50", precision="amp-fp16")
    cifar = Experiment(name="c", workload="cifar10", dataset="cifar10", precision="amp-fp16")
    assert lr.probe_shape(resnet, local) == SHAPE and lr.probe_shape(cifar, local) == "cifar10,64,16,8"
    slow = {SHAPE: Measured(fp32_s=0.19, bf16_s=0.23)}
    plan = lr.plan_local([resnet, cifar], local, run_dir=__import__("pathlib").Path("/r"), cpu=SPR, measured=slow)
    assert [e.train.precision for e in plan] == ["fp32", "bf16"]
    assert any("measured 230 ms/step in bf16, 190 in fp32" in n for n in plan[0].notes)


def test_only_pytorch_models_in_mixed_precision_are_timed():
    local = LocalRun()
    assert lr.probe_shape(Experiment(name="f", workload="resnet50", precision="fp32"), local) is None
    assert lr.probe_shape(Experiment(name="t", workload="resnet50", framework="tensorflow"), local) is None
    assert lr.probe_shape(Experiment(name="a", workload="allreduce", precision="amp-fp16"), local) is None


@pytest.mark.local_run
def test_the_probe_times_both_precisions_of_the_real_model():
    done = subprocess.run([sys.executable, "-m", "workloads.train.pytorch.precision_probe", "--steps", "1",
                           "cifar10,32,4,2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["cifar10,32,4,2"]
    assert out["fp32_s"] > 0 and out["bf16_s"] > 0 and out["steps"] == 1


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_cache_that_is_a_pipe_a_device_or_huge_is_ignored_with_one_line_at_once(tmp_path, kind,
                                                                                hostile_file):
    """A named pipe with no writer would hang the run before its plan; /dev/zero would fill memory: neither is
    read, each is named once, and the answers timed now replace it."""
    import time
    import tracemalloc

    cache = tmp_path / CACHE_FILE
    hostile_file(cache, kind, b"{" + b" " * (64 << 20))
    said: list[str] = []
    tracemalloc.start()
    started = time.monotonic()
    got = measured([SHAPE], facts=SPR, threads=1, environ={"EKSBENCH_CACHE": str(tmp_path)},
                   probe=fake_probe({SHAPE: {"fp32_s": 0.2, "bf16_s": 0.1}}, []), say=said.append)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.monotonic() - started < 5 and peak < 8 << 20
    assert got == {SHAPE: Measured(fp32_s=0.2, bf16_s=0.1)}
    assert [s for s in said if "ignoring the precision cache" in s] == [said[0]]
    assert cache.is_file() and not cache.is_symlink() and json.loads(cache.read_text())
