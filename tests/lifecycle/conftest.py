"""Fixtures for the lifecycle tests: a moto server on loopback, the fake ``pulumi`` on PATH, a project dir.

``bench run <stack>`` runs as a subprocess (in its own session, so a test can send SIGINT to its
process group as a terminal would) against:
- moto (``ThreadedMotoServer``): S3, STS, EC2 offerings, EKS; boto3 honours AWS_ENDPOINT_URL;
  Service Quotas for EC2 are answered by a patch of moto's backend (moto 5.2.1 knows only VPC's);
- ``tests/support/fake_pulumi.py`` as ``pulumi``, driven by the real ``pulumi.automation``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "support" / "fake_pulumi.py"
BUCKET = "lc-results"
REGION = "us-east-1"
QUOTA_VCPUS = {"L-DB2E81BA": 64.0, "L-417A185B": 0.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint():
    from moto.server import ThreadedMotoServer
    from moto.servicequotas.models import ServiceQuotasBackend

    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self, service_code, quota_code):  # EC2 vCPU quotas, as tests set them
        if service_code == "ec2" and quota_code in QUOTA_VCPUS:
            return {"ServiceCode": "ec2", "QuotaCode": quota_code, "QuotaName": quota_code,
                    "Value": QUOTA_VCPUS[quota_code], "Unit": "None"}
        return original(self, service_code, quota_code)

    ServiceQuotasBackend.get_service_quota = get_service_quota
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()
    ServiceQuotasBackend.get_service_quota = original


@pytest.fixture
def aws(moto_endpoint, monkeypatch):
    """Environment for boto3 (here and in children) pointing at a freshly reset moto, with the results bucket."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).read()
    env = {"AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    import boto3

    boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
    QUOTA_VCPUS.update({"L-DB2E81BA": 64.0, "L-417A185B": 0.0})
    return env


def stack_config(experiments: list[dict] | None = None, **extra) -> dict:
    config = {
        "aws:region": REGION,
        "eksbench:run_id": "r1",
        "eksbench:results": {"bucket": BUCKET},
        # A private endpoint: nothing reaches it in these tests, and the plan requires an explicit choice.
        "eksbench:cluster": {"public_access_cidrs": []},
        # max_size 3: alpha (2 nodes) and beta (1) run in parallel, and parallel experiments must fit the
        # group's GPUs at max_size (program/experiment_checks.py parallel_gpu_problems).
        "eksbench:gpu_node_groups": [{"name": "g5", "instance_type": "g5.2xlarge", "min_size": 0,
                                      "desired_size": 2, "max_size": 3}],
        "eksbench:network": {"az_count": 2, "nat": "single"},
        "eksbench:storage": {"kind": "efs"},
        "eksbench:experiments": experiments or [
            {"name": "alpha", "workload": "resnet50", "nodes": 2, "steps": 20, "dataset": "synthetic",
             "timeout_minutes": 5},
            {"name": "beta", "workload": "resnet50", "nodes": 1, "steps": 20, "dataset": "synthetic",
             "timeout_minutes": 5}],
    }
    config.update({f"eksbench:{k}" if ":" not in k else k: v for k, v in extra.items()})
    return {"config": config}


class Project:
    """A project dir (Pulumi.yaml + Pulumi.<stack>.yaml), the fake CLI's state, and how to run bench."""

    def __init__(self, tmp: Path, aws_env: dict[str, str]):
        self.dir = tmp / "project"
        self.dir.mkdir()
        shutil.copy(ROOT / "Pulumi.yaml", self.dir / "Pulumi.yaml")
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.state = tmp / "pulumi-state"
        self.results = tmp / "results"
        self.aws_env = aws_env
        self.scenario: dict = {}

    def install_pulumi(self) -> None:
        exe = self.bin / "pulumi"
        exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
        exe.chmod(0o755)

    def write_stack(self, name: str = "lc", **kwargs) -> str:
        (self.dir / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(stack_config(**kwargs)))
        return name

    def outputs(self, stack: str = "lc", run_id: str = "r1", names=("alpha", "beta"), **extra) -> dict:
        prefix = f"s3://{BUCKET}/eksbench/{stack}/{run_id}/"
        return {"cluster_name": f"eksbench-{stack}", "region": REGION, "results_bucket": BUCKET,
                "results_prefix": prefix, "experiment_results": {n: f"{prefix}{n}/" for n in names},
                "node_groups": ["system-ng", "gpu-g5-ng"], **extra}

    def env(self, with_credentials: bool = True) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PULUMI_"))}
        env.update(self.aws_env if with_credentials else {"AWS_ENDPOINT_URL": self.aws_env["AWS_ENDPOINT_URL"],
                                                          "AWS_DEFAULT_REGION": REGION,
                                                          "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
                                                          "AWS_CONFIG_FILE": "/nonexistent",
                                                          "AWS_EC2_METADATA_DISABLED": "true"})
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
        env["PULUMI_BACKEND_URL"] = f"file://{self.state}"
        env["PULUMI_CONFIG_PASSPHRASE"] = "test"
        env["FAKE_PULUMI_STATE"] = str(self.state)
        env["FAKE_PULUMI_SCENARIO"] = json.dumps(self.scenario)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "bench", "run", *args, "--yes", "--project-dir", str(self.dir),
                "--results-root", str(self.results), "--poll", "0.1", "--progress-every", "0.5"]

    def run(self, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), cwd=ROOT, env=kw.pop("env", None) or self.env(),
                              capture_output=True, text=True, timeout=timeout, **kw)

    def start(self, *args: str) -> subprocess.Popen:
        """In its own session with SIGINT at default: what a terminal's foreground job gets."""
        return subprocess.Popen(self.argv(*args), cwd=ROOT, env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def calls(self) -> list[dict]:
        path = self.state / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def commands(self) -> list[list[str]]:
        return [[a for a in c["argv"] if a != "--non-interactive"] for c in self.calls() if "argv" in c]

    def events(self) -> list[str]:
        return [c["event"] for c in self.calls() if "event" in c]

    def wait_for_event(self, event: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if event in self.events():
                return
            time.sleep(0.05)
        raise AssertionError(f"no {event!r} in {self.events()}")


@pytest.fixture
def project(tmp_path, aws) -> Project:
    p = Project(tmp_path, aws)
    p.install_pulumi()
    return p
