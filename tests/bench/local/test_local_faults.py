"""Faults that hid their cause: a stolen etcd port, a dead etcd whose log the teardown deleted, an evaluation
left running by a kill -9 of bench, a full disk named only in a node log."""

from __future__ import annotations

import http.server
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.local import etcd as local_etcd
from workloads.train.harness.outcome import root_cause

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.local_run, pytest.mark.hostile]


class Impostor(http.server.BaseHTTPRequestHandler):
    """Anything that answers HTTP 200 on the port etcd was to take."""

    def do_GET(self):  # noqa: N802 - http.server's name
        body = b'{"members": [], "node": {"dir": true}}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_stolen_client_port_is_not_taken_for_etcd_and_the_kept_log_says_why(tmp_path, monkeypatch):
    if not shutil.which("etcd"):
        pytest.skip("no etcd binary on PATH")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stolen = server.server_address[1]
    ports = iter([stolen, local_etcd.free_port()] * 3)
    monkeypatch.setattr(local_etcd, "free_port", lambda: next(ports))
    etcd = local_etcd.LocalEtcd(startup_timeout=5, tmp_root=str(tmp_path / "_tmp"), keep_log=tmp_path / "etcd.log")
    try:
        with pytest.raises(RuntimeError) as e:
            etcd.start()
    finally:
        server.shutdown()
        etcd.stop()
    message = str(e.value)
    assert "\n" not in message and message.startswith("etcd did not become healthy")
    assert "address already in use" in message and message.endswith(f"log: {tmp_path / 'etcd.log'}")
    assert "address already in use" in (tmp_path / "etcd.log").read_text()  # kept after the temp dir went


def test_kill_9_of_bench_during_an_evaluation_takes_the_evaluation_with_it(tmp_path):
    marker = tmp_path / "evaluating"
    sleeper = f"import pathlib, time; pathlib.Path({str(marker)!r}).write_text('x'); time.sleep(120)  # eksbench-eval-x"
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "import os\n"
              "from types import SimpleNamespace\n"
              "from bench.local import experiment_run, plan as local_plan\n"
              f"local_plan.evaluate_command = lambda exp, python: [python, '-c', {sleeper!r}]\n"
              f"local_plan.evaluation_dir = lambda exp: __import__('pathlib').Path({str(tmp_path)!r})\n"
              "run = experiment_run.ExperimentRun.__new__(experiment_run.ExperimentRun)\n"
              "run.exp, run.env, run.eval = SimpleNamespace(label='e'), dict(os.environ), None\n"
              "run._evaluate()\n")
    bench = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline and bench.poll() is None, "the evaluation never started"
            time.sleep(0.1)
        bench.kill()
        bench.wait(10)
        time.sleep(1.0)
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, "eksbench-eval-x")]
        for p in left:
            os.kill(int(p.name), signal.SIGKILL)
        assert not left, "the evaluation outlived bench"
    finally:
        if bench.poll() is None:
            bench.kill()


def _mentions(proc: Path, text: str) -> bool:
    try:
        return text.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_a_full_disk_is_the_root_cause_not_the_broken_pipe_after_it():
    tail = ["[rank0]: OSError: [Errno 28] No space left on device: '/results/metrics/rank-0.jsonl'",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ...",
            "[rank1]: torch.distributed.DistNetworkError: Broken pipe"]
    assert root_cause(tail) == "OSError: [Errno 28] No space left on device: '/results/metrics/rank-0.jsonl'"


def test_a_results_root_without_room_is_refused_in_one_line_before_anything_is_written(tmp_path, monkeypatch, capsys):
    """A 6 MiB file system once gave three pointless restarts and 'DistNetworkError: Broken pipe'."""
    from collections import namedtuple
    from types import SimpleNamespace

    from bench.local import run
    from core.config.overrides import Overrides

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(run.shutil, "disk_usage", lambda path: usage(6 * 2**20, 0, 6 * 2**20))
    args = SimpleNamespace(stack="dev", project_dir=str(ROOT), results_root=str(tmp_path / "results"), run_id=None,
                           experiment=None, resume=False, dry_run=False, deadline=None, progress_every=5.0,
                           overrides=Overrides())
    assert run.run_local(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "6 MiB free on its file system" in err[0] and "--results-root=" in err[0]
    assert not (tmp_path / "results").exists()
