"""Local processes for tests of any layer: a loopback etcd, and killing a process tree at once.

Both come from bench's local runner (``bench.local.etcd``, ``bench.proc``), which the tests of the
trainer (tests/workloads) and of the local runner (tests/bench) share; tests/support may import them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest

from bench.proc import descendants


@pytest.fixture(scope="module")
def etcd():
    if not shutil.which("etcd"):
        pytest.skip("no etcd binary on PATH (Debian: apt-get install etcd-server)")
    from bench.local.etcd import LocalEtcd

    with LocalEtcd() as server:
        yield server


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
