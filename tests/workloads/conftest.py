"""Helpers for the workload tests: node commands, polling, a run that must keep stepping; the loopback etcd
and killing a process tree come from tests/support/processes.py."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from tests.support.processes import etcd, kill_tree  # noqa: F401 - the etcd fixture, for the workload tests

ROOT = Path(__file__).resolve().parents[2]


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


def python() -> str:
    return sys.executable


def launched_on_two_gloo_processes(args, experiment: str) -> list[str]:
    """The results launcher over torchrun with 2 processes on one node (c10d on a free loopback port) over the
    trainer with ``args`` (a TrainArgs): the node command the cluster's pods run, at the size of this machine."""
    import socket

    from core.contract.launch_command import Torchrun, launched_torchrun, launcher_argv, torchrun_argv, trainer_argv

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agent = Torchrun(min_nodes=1, max_nodes=1, nproc_per_node=2, max_restarts=0, rdzv_backend="c10d",
                     rdzv_endpoint=f"127.0.0.1:{port}", rdzv_id=experiment, rdzv_conf="join_timeout=60",
                     local_addr="127.0.0.1")
    return [*launcher_argv(python=sys.executable, results_dir=args.results_dir, experiment=experiment,
                           summary="always", launched=launched_torchrun(agent, args, ())), "--",
            *torchrun_argv(agent, program=(sys.executable, "-m", "torch.distributed.run")), *trainer_argv(args)]
