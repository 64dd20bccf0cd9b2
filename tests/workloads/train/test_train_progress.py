"""progress.json: what the launcher's summary node publishes for bench run's live lines."""

import json

import boto3
from moto import mock_aws

from workloads.train.common.metrics import JsonLines
from workloads.train.harness.progress import ProgressPublisher, progress_document


def write_ranks(results, steps=5, world=2):
    for rank in range(world):
        with JsonLines(results / "metrics" / f"rank-{rank}.jsonl") as f:
            for step in range(1, steps + 1):
                f.write({"step": step, "samples": 8, "step_time_s": 0.5, "warmup": step == 1, "world_size": world,
                         "rank": rank})


def test_the_document_has_the_latest_step_and_the_recent_rate_over_ranks(tmp_path):
    write_ranks(tmp_path)
    doc = progress_document(tmp_path, total=30, now=0)
    assert doc["step"] == 5 and doc["total"] == 30 and doc["world_size"] == 2
    assert doc["samples_per_s"] == 32.0  # 2 ranks x 8 samples / 0.5 s, warm-up left out
    assert progress_document(tmp_path / "nothing", total=None, now=0)["step"] == 0


@mock_aws
def test_the_publisher_puts_it_next_to_the_results(tmp_path):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="res")
    write_ranks(tmp_path)
    ProgressPublisher(tmp_path, "res", "eksbench/dev/r1/exp/", total=30, client=s3).publish()
    body = json.loads(s3.get_object(Bucket="res", Key="eksbench/dev/r1/exp/progress.json")["Body"].read())
    assert body["step"] == 5 and body["total"] == 30
