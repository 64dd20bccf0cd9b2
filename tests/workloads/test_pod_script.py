"""The training container's sh script (workloads.launch.pod_script), run for real with ``sh``: which
packages it installs, a failed install, and a SIGTERM during a slow install.

``python3`` on PATH is a wrapper: ``python3 -m pip ...`` records its arguments (and sleeps or
fails when told to), anything else runs the real interpreter, so the real launcher
(``workloads.train.harness.launch``) writes the summary. A module the image lacks is a stand-in module
on PYTHONPATH whose import fails. Where the machine allows ``unshare --pid``, sh runs as PID 1 of
a new PID namespace, as in a container: the kernel then drops a SIGTERM sent from outside unless
sh has a handler for it (pid_namespaces(7)).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.workloads.conftest import ROOT, wait_for
from workloads.launch.pod_script import ensure_modules, launcher_script


def fake_python(tmp_path: Path) -> dict[str, str]:
    """PATH with the python3 wrapper first, PYTHONPATH with an ``etcd`` that cannot be imported."""
    bin_dir, missing = tmp_path / "bin", tmp_path / "missing"
    bin_dir.mkdir()
    missing.mkdir()
    (missing / "etcd.py").write_text("raise ImportError('python-etcd is not in this image')\n")
    wrapper = bin_dir / "python3"
    wrapper.write_text(f"""#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  shift 2
  echo "$*" >> "$FAKE_PIP_LOG"
  echo $$ > "$FAKE_PIP_LOG.pid"
  if [ -n "${{FAKE_PIP_SLEEP:-}}" ]; then exec sleep "$FAKE_PIP_SLEEP"; fi
  exit "${{FAKE_PIP_RC:-0}}"
fi
exec {sys.executable} "$@"
""")
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.pop("JOB_COMPLETION_INDEX", None)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PYTHONPATH=f"{missing}{os.pathsep}{ROOT}",
               FAKE_PIP_LOG=str(tmp_path / "pip.log"),
               # uploads fail at once (nothing listens there); the summary on the results folder is what counts
               AWS_ENDPOINT_URL_S3="http://127.0.0.1:9", AWS_MAX_ATTEMPTS="1", AWS_ACCESS_KEY_ID="x",
               AWS_SECRET_ACCESS_KEY="y", AWS_DEFAULT_REGION="us-west-2", AWS_EC2_METADATA_DISABLED="true")
    return env


def script(tmp_path: Path) -> str:
    marker = tmp_path / "command-ran"
    return launcher_script(("sh", "-c", f"touch {marker}"), results_dir=str(tmp_path / "r"),
                             results_uri="s3://bkt/p/", experiment="e", modules=("etcd", "boto3"))


def pip_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "pip.log"
    return log.read_text().splitlines() if log.exists() else []


def test_only_the_modules_that_fail_to_import_are_checked_one_by_one():
    text = ensure_modules(("etcd", "boto3"))
    assert text.startswith('python3 -c "import etcd, boto3" 2>/dev/null || {')
    assert 'python3 -c "import etcd" 2>/dev/null || step' in text and "--quiet python-etcd==0.4.5" in text
    assert 'python3 -c "import boto3" 2>/dev/null || step' in text and "--quiet boto3==1.43.11" in text
    assert ensure_modules(()) == ""


@pytest.mark.local_run
def test_only_the_missing_package_is_installed(tmp_path):
    """The image has boto3 but not python-etcd: pip installs python-etcd alone, then the command runs."""
    run = subprocess.run(["sh", "-c", script(tmp_path)], env=fake_python(tmp_path), cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert pip_calls(tmp_path) == ["install --no-cache-dir --quiet python-etcd==0.4.5"]
    assert (tmp_path / "command-ran").exists()


@pytest.mark.local_run
def test_a_failed_install_stops_the_pod_with_a_summary(tmp_path):
    env = {**fake_python(tmp_path), "FAKE_PIP_RC": "3"}
    run = subprocess.run(["sh", "-c", script(tmp_path)], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 3, run.stderr
    assert not (tmp_path / "command-ran").exists()  # never went on into torchrun
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["exit_code"] == 3
    assert summary["log_tail"] == ["installing python-etcd==0.4.5 failed with exit code 3"]


def can_unshare_pid() -> bool:
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.local_run
@pytest.mark.parametrize("as_pid_1", [True, False], ids=["sh-as-pid-1", "sh-as-child"])
def test_sigterm_during_a_slow_install_stops_at_once_with_a_summary(tmp_path, as_pid_1):
    if as_pid_1 and not can_unshare_pid():
        pytest.skip("unshare --pid is not permitted here (needs root or user namespaces)")
    env = {**fake_python(tmp_path), "FAKE_PIP_SLEEP": "60"}
    argv = ["sh", "-c", script(tmp_path)]
    proc = subprocess.Popen(["unshare", "--pid", "--fork", *argv] if as_pid_1 else argv, env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: pip_calls(tmp_path), 60, "the install to start", [proc])
        sh = children(proc.pid)[0] if as_pid_1 else proc.pid
        os.kill(sh, signal.SIGTERM)  # what the kubelet sends to the container's PID 1
        t0 = time.monotonic()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("sh did not stop within 30 s of SIGTERM (the install ran on)")
        stopped_in = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            from tests.workloads.conftest import kill_tree

            kill_tree(proc)
    assert proc.returncode == 143, proc.stderr.read().decode()
    assert stopped_in < 20
    assert not (tmp_path / "command-ran").exists()
    if not as_pid_1:  # (as PID 1, the namespace ends with sh: the kernel kills everything left in it)
        pip_pid = int((tmp_path / "pip.log.pid").read_text())
        assert not Path(f"/proc/{pip_pid}").exists(), "the install stand-in still runs"
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["exit_code"] == 143 and summary["signal"] == "SIGTERM"
    assert summary["log_tail"] == ["stopped by a signal while installing python-etcd==0.4.5"]
