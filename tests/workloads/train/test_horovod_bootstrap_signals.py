"""The Horovod bootstrap passes SIGTERM/SIGINT on to the ranks it started: the results launcher (and a
pod's kubelet) signal the bootstrap only, and ranks left running would outlive their pod's command
(locally: orphans of a stopped or timed-out run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_sigterm_reaches_every_rank_and_the_exit_code_says_which_signal(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    rank = ("import os, time, pathlib; pathlib.Path(r'%s', os.environ['HOROVOD_RANK']).write_text(str(os.getpid()));"
            " time.sleep(120)" % pids)
    # Pod 1 of 2 with two slots: no rendezvous server (pod 0 serves it), so Horovod is not needed here.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EKSBENCH_HVD_HOSTS": "a,b", "EKSBENCH_HVD_SLOTS": "2",
           "EKSBENCH_HVD_PORT": "29500", "JOB_COMPLETION_INDEX": "1"}
    boot = subprocess.Popen([sys.executable, "-m", "workloads.train.horovod.bootstrap", sys.executable, "-c", rank],
                            cwd=ROOT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        ranks = [int(p.read_text()) for p in sorted(pids.iterdir())]
        assert len(ranks) == 2
        boot.send_signal(signal.SIGTERM)  # the launcher signals its command only, not its process group
        assert boot.wait(timeout=30) == 128 + signal.SIGTERM
        time.sleep(0.5)
        for pid in ranks:
            alive = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
            assert alive in ("", "Z"), f"rank process {pid} still running after the bootstrap ended ({alive})"
    finally:
        if boot.poll() is None:
            os.killpg(boot.pid, signal.SIGKILL)
        for p in pids.iterdir():
            try:
                os.kill(int(p.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
