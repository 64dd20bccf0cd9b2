"""Fixtures for the datasets tests: a moto S3 bucket, call counters, a tiny CIFAR tarball."""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile
import threading
from pathlib import Path

import pytest

BUCKET = "eksbench-datasets"


@pytest.fixture
def aws(monkeypatch):
    from moto import mock_aws

    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_REGION", "us-east-1")):
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


@pytest.fixture
def s3(aws):
    import boto3

    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


class Calls:
    """Counts the S3 write calls a client makes (keys per operation), from botocore's events."""
    WRITES = ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")
    OPS = WRITES + ("HeadObject",)

    def __init__(self, client, fail_after: int | None = None):
        self.keys: dict[str, list[str]] = {op: [] for op in self.OPS}
        self.fail_after = fail_after
        self.lock = threading.Lock()  # uploads run on the transfer manager's threads
        for op in self.OPS:
            client.meta.events.register(f"before-parameter-build.s3.{op}", self._hook(op))

    def _hook(self, op):
        def hook(params, **kwargs):
            with self.lock:
                if self.fail_after is not None and op == "PutObject" and len(self.keys[op]) >= self.fail_after:
                    from botocore.exceptions import EndpointConnectionError

                    raise EndpointConnectionError(endpoint_url="https://s3.amazonaws.com (simulated outage)")
                self.keys[op].append(params["Key"])
        return hook

    @property
    def uploads(self) -> list[str]:
        return self.keys["PutObject"] + self.keys["CreateMultipartUpload"]


def keys_under(client, prefix: str) -> dict[str, int]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        out.update({o["Key"][len(prefix):]: o["Size"] for o in page.get("Contents", [])})
    return out


def cifar_tarball(path: Path, *, per_batch: int = 20, seed: int = 0) -> str:
    """A CIFAR-10-shaped cifar-10-python.tar.gz (torchvision's pickle format, tiny). Returns its md5."""
    import numpy as np

    rng = np.random.default_rng(seed)
    members = {}
    for name in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"):
        batch = {"batch_label": name, "labels": rng.integers(0, 10, per_batch).tolist(),
                 "data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 "filenames": [f"img_{i}.png" for i in range(per_batch)]}
        members[name] = pickle.dumps(batch, protocol=2)
    members["batches.meta"] = pickle.dumps({"label_names": [f"class{i}" for i in range(10)],
                                            "num_cases_per_batch": per_batch, "num_vis": 3072}, protocol=2)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return hashlib.md5(path.read_bytes()).hexdigest()


def tells_size(text: str, size: int, folder) -> bool:
    """Whether ``text`` shows ``size`` as a number, with ``folder`` (a temporary path whose random
    name or counter may hold the same digits) taken out first."""
    import re

    return re.search(rf"\b{size}\b", text.replace(str(folder), "<folder>")) is not None
