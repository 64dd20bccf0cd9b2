"""``.ci/gpu``, the GPU checks as one command for a machine with a CUDA device: here, without one, its test stage
runs the GPU suite, which skips with its reason, and keeps the log; an unknown stage is refused."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.workloads.conftest import ROOT

torch = pytest.importorskip("torch")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here: .ci/gpu would run the whole suite")
def test_the_gpu_script_runs_the_gpu_suite_and_keeps_its_log(tmp_path):
    done = subprocess.run(["bash", ".ci/gpu", "tests"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OUT": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    log = (tmp_path / "tests-gpu.log").read_text()
    assert "no CUDA device: the GPU suite needs one" in log and " passed" not in log and "skipped" in log
    assert (tmp_path / "gpu.csv").is_file()
    bad = subprocess.run(["bash", ".ci/gpu", "benchmark"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OUT": str(tmp_path)})
    assert bad.returncode == 2 and "unknown stage 'benchmark': use tests, resnet50, input or llm" in bad.stderr
