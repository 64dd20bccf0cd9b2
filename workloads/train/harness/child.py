"""The command the launcher runs, as its child: started in its own session with the environment it needs,
its output teed to the node's log (each line's time beside it) and to our stdout, signals forwarded to it
with a SIGKILL ``--grace`` seconds later, and nothing it started left behind once it ends."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.contract import summary_fields as F
from core.contract.names import ENV_LAUNCHED_AT, node_log_times
from workloads.train.harness.fabric_check import TransportWatch


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The command's environment: ours, plus a torchrun setting elastic restarts need.

    torch >= 2.4 shares one TCPStore, hosted by the first round's rank-0 agent, across all
    rendezvous rounds (dynamic_rendezvous.py, ``_shared_tcp_store_server``). After a restart
    the workers then find the previous attempt's gloo keys in it (we saw ranks of different
    restart counts hang in connectFullMesh), and if that agent's node is gone the others keep
    pointing at a dead store. ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` gives every round a fresh
    store on the new rank 0 (the pre-2.4 behaviour). An explicit value in the environment wins.
    """
    env = dict(environ)
    env.setdefault(ENV_LAUNCHED_AT, f"{time.time():.3f}")  # the trainer's start-up record counts from here
    env.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class LineTimes:
    """``logs/<node id>.log.times``: for each line the log gets, ``<its byte offset in the log> <epoch seconds>``.

    The log stays the command's output byte for byte (root causes, NCCL's lines and every reader of it parse
    it as it is); ``bench logs --timestamps`` joins the two by offset, so a line the log has and this file
    lacks (its write failed, a launcher that died between the two) shows without a time, never with another
    line's. Writing it never fails the run: the first OSError ends it."""

    def __init__(self, file: Any):
        self.file = file

    @classmethod
    def open(cls, directory: Path | None, node_id: str) -> "LineTimes":
        try:
            return cls(open(Path(directory) / node_log_times(node_id), "ab", buffering=0) if directory else None)
        except OSError:
            return cls(None)

    def stamp(self, log: Any) -> None:
        """The time of the line about to be written to ``log`` (at its end: the log is opened to append)."""
        if self.file is None:
            return
        try:
            self.file.write(f"{log.tell()} {time.time():.3f}\n".encode())
        except OSError:
            self.close()

    def close(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
            self.file = None


class Child:
    """The command, its tee thread and the signal forwarding."""

    def __init__(self, command: Sequence[str], log: Any, grace: float, watch: TransportWatch | None = None,
                 times: Any = None):
        self.log = log
        self.times = times  # LineTimes: when each line reached the log (bench logs --timestamps)
        self.watch = watch
        self.tail: collections.deque[str] = collections.deque(maxlen=80)
        self.signal_name: str | None = None
        self.peer_status: str | None = None  # what --stop-with's summary said, once it stopped the command
        self.grace = grace
        self.proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=child_env(os.environ))
        self.tee = threading.Thread(target=self._copy, daemon=True)
        self.tee.start()

    def _copy(self) -> None:
        out = getattr(sys.stdout, "buffer", None)
        for line in iter(self.proc.stdout.readline, b""):
            if self.log is not None:
                try:
                    if self.times is not None:
                        self.times.stamp(self.log)
                    self.log.write(line)
                except OSError:  # the file system went away: keep the tail and stdout
                    self.log = None
            text = line.decode("utf-8", "replace").rstrip("\n")
            self.tail.append(text)
            if self.watch is not None and self.watch.sees(text):  # fabric: strict, NCCL on sockets: stop now
                self.forward(signal.SIGTERM)
            if out is not None:
                try:
                    out.write(line)
                    out.flush()
                except (OSError, ValueError):
                    out = None

    def stop_with(self, path: str, since: float, every: float = 1.0) -> None:
        """Watch for ``path`` (a summary written after ``since``) in a thread; once it is there, record its status
        in ``peer_status`` and stop the command: paddle's pservers serve until their trainers are done, and
        trainers that failed never tell them so."""
        def watch() -> None:
            while self.proc.poll() is None:
                try:
                    if os.stat(path).st_mtime >= since - 1:
                        with open(path, "rb") as f:
                            status = json.loads(f.read(1_000_000)).get(F.STATUS)
                        self.peer_status = status if status in F.STATUSES else F.FAILED
                        print(f"launcher: {path} says {self.peer_status}: stopping the command", flush=True)
                        self.forward(signal.SIGTERM)
                        return
                except (OSError, ValueError, AttributeError):
                    pass  # not there yet, or half-written: look again
                time.sleep(every)
        threading.Thread(target=watch, daemon=True).start()

    def forward(self, signum: int, _frame: Any = None) -> None:
        self.signal_name = signal.Signals(signum).name
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
            timer = threading.Timer(self.grace, self._kill)
            timer.daemon = True
            timer.start()

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self) -> int:
        rc = self.proc.wait()
        # Nothing the command started outlives it: what is left in its session's process group (Paddle's gloo
        # set-up forks a multiprocessing Manager that stayed behind its stopped pserver) is killed now. The group
        # id is the command's pid (start_new_session); an empty group is ESRCH.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.tee.join(timeout=10)
        if self.log is not None:
            self.log.close()
        if self.times is not None:
            self.times.close()
        return rc
