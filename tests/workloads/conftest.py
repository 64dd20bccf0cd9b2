"""Helpers for the workload tests: a loopback etcd, node commands, polling and killing a process tree."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import pytest

from bench.proc import descendants

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def etcd():
    if not shutil.which("etcd"):
        pytest.skip("no etcd binary on PATH (Debian: apt-get install etcd-server)")
    from bench.local_etcd import LocalEtcd

    with LocalEtcd() as server:
        yield server


def child_env(threads: int = 1) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, procs: list | None = None) -> None:
    """Poll ``predicate`` every 0.1 s; fail with ``what`` after ``timeout`` (or if all ``procs`` exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if procs and all(p.poll() is not None for p in procs):
            if predicate():
                return
            raise AssertionError(f"processes exited before: {what}")
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for: {what}")


def _metrics_progress(results_dir: Path | None) -> tuple[int, int]:
    """(files, bytes) written under ``<results-dir>/metrics``: it grows with every step line."""
    if results_dir is None or not (results_dir / "metrics").is_dir():
        return 0, 0
    sizes = [f.stat().st_size for f in (results_dir / "metrics").iterdir() if f.is_file()]
    return len(sizes), sum(sizes)


def run_training(cmd: list[str], *, env: dict[str, str], startup_s: float = 600,
                 stall_s: float = 300) -> subprocess.CompletedProcess:
    """Run a training command to its end, as long as it keeps stepping.

    The budget counts steps, not a machine's speed: ``startup_s`` until the first metrics line
    under ``--results-dir``, then ``stall_s`` since the last new line. A run that stops
    stepping is killed and fails naming where it stood; a slow CPU only makes it slower.
    """
    results = next((Path(a.split("=", 1)[1]) for a in cmd if a.startswith("--results-dir=")), None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err)
        seen, budget, since = _metrics_progress(results), startup_s, time.monotonic()
        while proc.poll() is None:
            time.sleep(0.2)
            now = _metrics_progress(results)
            if now != seen:
                seen, budget, since = now, stall_s, time.monotonic()
            elif time.monotonic() - since > budget:
                kill_tree(proc)
                out.seek(0), err.seek(0)
                tail = (out.read().decode(errors="replace") + err.read().decode(errors="replace"))[-3000:]
                raise AssertionError(f"no new metrics line for {budget:.0f}s ({seen[1]} bytes of metrics so far): "
                                     f"{' '.join(cmd[:6])} ...\n{tail}")
        out.seek(0), err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read().decode(errors="replace"),
                                           err.read().decode(errors="replace"))


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a process and everything under it at once: a node that disappears."""
    pids = [proc.pid, *descendants(proc.pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)


def stop_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            kill_tree(p)


def python() -> str:
    return sys.executable
