"""Helpers for the workload tests: a loopback etcd, node commands, polling and killing a process tree."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
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
