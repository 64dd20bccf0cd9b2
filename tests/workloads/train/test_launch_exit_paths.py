"""The launcher's exit paths, with the real ``python -m workloads.train.harness.launch`` and real signals:
a SIGTERM during the upload (a Job whose success policy is met removes its lingering pods), a
results folder it cannot write, and the live progress total of an epoch run.

S3 is moto's server; a small TCP proxy in front of it holds each request for a moment, a
stand-in for a slow upload, and tells the test when the first upload has started.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict

import pytest

from core.contract.train_args import TrainArgs
from tests.support.pod_network import pipe
from tests.workloads.conftest import ROOT, child_env, wait_for
from workloads.train.harness import launch
from workloads.train.harness.upload import in_upload_order

BUCKET = "results"
REGION = "us-west-2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def moto_endpoint():
    moto_server = pytest.importorskip("moto.server")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(moto_endpoint):
    import urllib.request

    import boto3

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).read()
    client = boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    return client


class SlowProxy:
    """A TCP proxy to ``port`` that holds each HTTP request ``delay`` seconds before passing it on
    and records its request line ("PUT /results/p/summary.json?... HTTP/1.1")."""

    REQUEST = re.compile(rb"^(GET|PUT|POST|HEAD|DELETE) \S+ HTTP/1\.[01]\r\n")

    def __init__(self, port: int, delay: float):
        self.port, self.delay, self.requests = port, delay, []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.port))
        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        try:
            while data := client.recv(65536):
                if self.REQUEST.match(data):
                    self.requests.append(data.split(b"\r\n", 1)[0].decode())
                    time.sleep(self.delay)
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            upstream.close()

    def close(self) -> None:
        self.server.close()


def launcher_env(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true")
    env.pop("JOB_COMPLETION_INDEX", None)
    return env


def keys(s3, prefix: str = "p/") -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def test_summary_goes_up_first_and_checkpoints_last():
    plan = [(None, f"p/{k}") for k in ("checkpoints/latest.pt", "logs/node-0.log", "metrics/rank-0.jsonl",
                                        "summary.json", "eval/summary.json")]
    assert [k for _, k in in_upload_order(plan, "p/")] == [
        "p/summary.json", "p/eval/summary.json", "p/logs/node-0.log", "p/metrics/rank-0.jsonl",
        "p/checkpoints/latest.pt"]


@pytest.mark.local_run
def test_sigterm_during_the_upload_still_uploads_the_summary(tmp_path, s3, moto_endpoint):
    """Pod 0 of an elastic Job gets SIGTERM while it uploads (the success policy was met and the
    Job controller removes lingering pods): the upload goes on and summary.json is on S3."""
    results = tmp_path / "r"
    for rel, body in {"metrics/rank-0.jsonl": '{"step": 1}\n', "checkpoints/latest.pt": "x" * 1000}.items():
        (results / rel).parent.mkdir(parents=True, exist_ok=True)
        (results / rel).write_text(body)
    port = int(moto_endpoint.rsplit(":", 1)[1])
    proxy = SlowProxy(port, delay=1.0)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "workloads.train.harness.launch", "--results-dir", str(results),
                                 "--results-uri", f"s3://{BUCKET}/p/", "--node-id", "node-0", "--summary", "always",
                                 "--", sys.executable, "-c", "print('trained')"],
                                cwd=ROOT, env=launcher_env(proxy.endpoint), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        wait_for(lambda: proxy.requests, 60, "the first upload request", [proc])
        proc.send_signal(signal.SIGTERM)  # what the Job controller's pod deletion sends
        _, err = proc.communicate(timeout=60)
    finally:
        proxy.close()
    assert proc.returncode == 0, err.decode()  # the run succeeded; the signal came after it
    assert proxy.requests[0].startswith(f"PUT /{BUCKET}/p/summary.json"), proxy.requests
    assert keys(s3) == ["p/checkpoints/latest.pt", "p/logs/node-0.log", "p/logs/node-0.log.times",
                        "p/metrics/rank-0.jsonl", "p/summary.json"]
    summary = json.loads(s3.get_object(Bucket=BUCKET, Key="p/summary.json")["Body"].read())
    assert summary["status"] == "succeeded" and summary["signal"] is None


def unwritable_results(tmp_path, how: str):
    """A results folder the launcher cannot write, and the command prefix that runs it so."""
    if how == "file-in-the-way":  # a plain file where a folder should be: NotADirectoryError, any user
        (tmp_path / "blocked").write_text("")
        return tmp_path / "blocked" / "exp", []
    # issue 16 fault 2: root limited to IPC_LOCK (the EFA pods) in a folder of UID 10001, mode 0755
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv (util-linux) to drop every capability but IPC_LOCK")
    folder = tmp_path / "exp"
    folder.mkdir()
    os.chown(folder, 10001, 10001)
    folder.chmod(0o755)
    return folder, ["setpriv", "--bounding-set=-all,+ipc_lock", "--inh-caps=-all", "--"]


@pytest.mark.local_run
@pytest.mark.parametrize("how", ["file-in-the-way", "not-the-owner"])
def test_a_results_folder_that_cannot_be_written_still_gives_an_uploaded_summary(tmp_path, s3, moto_endpoint, how):
    results, prefix = unwritable_results(tmp_path, how)
    scratch = tmp_path / "tmp"  # the pods' /tmp emptyDir
    scratch.mkdir(mode=0o777)
    scratch.chmod(0o1777)
    env = {**launcher_env(moto_endpoint), "TMPDIR": str(scratch)}
    run = subprocess.run([*prefix, sys.executable, "-m", "workloads.train.harness.launch", "--results-dir", str(results),
                          "--results-uri", f"s3://{BUCKET}/p/", "--node-id", "node-0", "--summary", "always",
                          "--", sys.executable, "-c", "print('the command ran')"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert keys(s3) == ["p/logs/node-0.log", "p/logs/node-0.log.times", "p/summary.json"]
    summary = json.loads(s3.get_object(Bucket=BUCKET, Key="p/summary.json")["Body"].read())
    assert summary["status"] == "succeeded" and str(results) in summary["results_dir_error"]
    log = s3.get_object(Bucket=BUCKET, Key="p/logs/node-0.log")["Body"].read().decode()
    assert "the command ran" in log


def test_live_progress_total_is_the_step_count_only_for_step_runs():
    steps = launch.train_config(json.dumps(asdict(TrainArgs(workload="cifar10", steps=500))))
    epochs = launch.train_config(json.dumps(asdict(TrainArgs(workload="cifar10", epochs=20))))
    assert launch.progress_total(steps) == 500
    assert launch.progress_total(epochs) is None  # steps per epoch depend on the data and the world size
    assert launch.progress_total(None) is None


def test_the_publisher_gets_no_step_total_for_an_epoch_run(tmp_path, monkeypatch):
    totals = []

    class Recorder:
        def __init__(self, *a, total, **k):
            totals.append(total)

        def start(self):
            return self

        def stop(self):
            pass

    monkeypatch.setattr(launch, "ProgressPublisher", Recorder)
    monkeypatch.setattr(launch, "upload", lambda plan, bucket: [])
    code = launch.main(["--results-dir", str(tmp_path), "--results-uri", "s3://bkt/p/", "--node-id", "node-0",
                        "--summary", "always", "--", sys.executable, "-c", "pass", "-m", "workloads.train.pytorch",
                        "--workload=cifar10", "--epochs=20"])
    assert code == 0 and totals == [None]
