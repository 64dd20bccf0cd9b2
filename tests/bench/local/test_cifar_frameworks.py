"""CIFAR-10 in TensorFlow, Horovod and Paddle under the dev stack's ``local:`` section, for real (each from its
own venv, two processes each, Paddle with two pservers): each succeeds although that section's image_size (64)
is not CIFAR-10's 32. And a Paddle run whose trainers fail stops its pservers within seconds, not at
timeout_minutes: they end with the trainers' summary.json (the launcher's --stop-with)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bench.local.framework_venvs import missing_venv, venv_python

ROOT = Path(__file__).resolve().parents[3]
STACK = ROOT / "tests" / "stacks" / "Pulumi.cifar-frameworks.yaml"
DEV_LOCAL = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]["eksbench:local"]
pytestmark = pytest.mark.local_run


def run(tmp: Path, config: dict, *extra: str, env: dict[str, str] | None = None) \
        -> tuple[subprocess.CompletedProcess, Path, float]:
    project = tmp / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    (project / "Pulumi.cifar-frameworks.yaml").write_text(yaml.safe_dump({"config": config}))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "bench", "run", "cifar-frameworks", "--local", "--run-id", "t",
                           "--project-dir", str(project), "--results-root", str(tmp / "results"),
                           "--progress-every", "10", *extra], cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
                          capture_output=True, text=True, timeout=900)
    return done, tmp / "results" / "cifar-frameworks" / "t", time.monotonic() - started


def stack() -> dict:
    return yaml.safe_load(STACK.read_text())["config"]


def test_the_stack_scales_down_by_the_dev_stacks_own_local_section():
    assert stack()["eksbench:local"] == DEV_LOCAL and DEV_LOCAL["image_size"] != 32


def test_tensorflow_horovod_and_paddle_train_cifar10_under_the_dev_local_section(tmp_path):
    for framework in ("tensorflow", "horovod", "paddle"):
        assert venv_python(framework) is not None, missing_venv(framework)
    done, run_dir, _ = run(tmp_path, stack())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("tf-cifar10", "horovod-cifar10", "paddle-cifar10"):
        s = json.loads((run_dir / name / "summary.json").read_text())
        assert s["status"] == "succeeded" and s["coverage"]["steps"] == DEV_LOCAL["steps"], (name, s.get("error"))
    pserver = json.loads((run_dir / "paddle-cifar10" / "pserver" / "summary.json").read_text())
    assert pserver["status"] == "succeeded"


def data_not_found_in_trainers(tmp: Path) -> dict[str, str]:
    """An environment in which Paddle's trainers find no CIFAR-10 file (a sitecustomize on PYTHONPATH, which the
    Paddle venv's interpreter reads in a TRAINER process only, makes opening one raise FileNotFoundError); the
    pservers read no data and would serve on. (An experiment's args may not move --data-dir.)"""
    hook = tmp / "hook"
    hook.mkdir()
    prefix = os.path.realpath(Path(venv_python("paddle")).parent.parent)
    (hook / "sitecustomize.py").write_text(
        "import builtins, os, sys\n"
        f"if os.environ.get('TRAINING_ROLE') == 'TRAINER' and os.path.realpath(sys.prefix) == {prefix!r}:\n"
        "    real_open = builtins.open\n"
        "    def missing(file, *args, **kwargs):\n"
        "        if 'cifar-10-batches-py' in str(file):\n"
        "            raise FileNotFoundError(2, 'No such file or directory', str(file))\n"
        "        return real_open(file, *args, **kwargs)\n"
        "    builtins.open = missing\n")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))}


def test_paddle_pservers_stop_within_seconds_when_their_trainers_fail(tmp_path):
    assert venv_python("paddle") is not None, missing_venv("paddle")
    config = stack()
    (paddle,) = [e for e in config["eksbench:experiments"] if e["framework"] == "paddle"]
    config["eksbench:experiments"] = [{**paddle, "timeout_minutes": 10}]
    config["eksbench:local"] = {**DEV_LOCAL, "timeout_minutes": 10}
    done, run_dir, took = run(tmp_path, config, env=data_not_found_in_trainers(tmp_path))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    trainers = json.loads((run_dir / "paddle-cifar10" / "summary.json").read_text())
    pservers = json.loads((run_dir / "paddle-cifar10" / "pserver" / "summary.json").read_text())
    assert trainers["status"] == "failed" and "FileNotFoundError" in (trainers["error"] or "")
    assert pservers["status"] == "failed" and pservers["stop_reason"].startswith("stopped with its peers: ")
    assert pservers["stop_reason"].endswith("summary.json says failed")
    assert took < 120, f"the run took {took:.0f}s: the pservers waited for the timeout"
    time.sleep(1)  # nothing the run started outlives it (a pserver's gloo Manager once did)
    left = [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, str(run_dir))]
    assert not left, f"processes outlived the run: {left}"


def _mentions(proc: Path, text: str) -> bool:
    try:
        return text.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False
